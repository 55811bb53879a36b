//! A headless Chromium driven over WebDriver (Debian's `chromium` and `chromedriver`):
//! the handful of W3C WebDriver calls the console's browser test makes, as JSON over
//! HTTP with the reqwest the tests already use, rather than a WebDriver crate.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};

/// The W3C name of an element reference in a WebDriver answer.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// Where Debian puts the browser and its driver.
pub const CHROMIUM: &str = "/usr/bin/chromium";
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// Why a browser test cannot run here (`None`: it can).
pub fn unavailable() -> Option<String> {
    [CHROMIUM, CHROMEDRIVER]
        .iter()
        .find(|p| !Path::new(p).exists())
        .map(|p| format!("{p} is not installed (Debian: apt-get install chromium chromium-driver)"))
}

/// A chromedriver process and one browser session in it; both end when dropped.
pub struct Browser {
    driver: Child,
    http: reqwest::Client,
    base: String,
}

impl Browser {
    /// Starts chromedriver on a free port and a headless Chromium session of
    /// `width` x `height`.
    pub async fn start(width: u32, height: u32) -> Browser {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let http = reqwest::Client::new();
        let root = format!("http://127.0.0.1:{port}");
        let started = Instant::now();
        while http.get(format!("{root}/status")).send().await.is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "chromedriver did not answer"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", format!("--window-size={width},{height}")]
            }
        }}});
        let res: Value = http
            .post(format!("{root}/session"))
            .json(&caps)
            .send()
            .await
            .expect("a session")
            .json()
            .await
            .expect("a session's answer");
        let id = res["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {res}"))
            .to_string();
        Browser {
            driver,
            http,
            base: format!("{root}/session/{id}"),
        }
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let res: Value = req
            .send()
            .await
            .expect("webdriver answers")
            .json()
            .await
            .expect("webdriver's JSON");
        if res["value"].get("error").is_some() {
            panic!("webdriver {path}: {}", res["value"]);
        }
        res["value"].clone()
    }

    /// Opens `url`.
    pub async fn goto(&self, url: &str) {
        self.call(reqwest::Method::POST, "/url", Some(json!({"url": url})))
            .await;
    }

    /// Runs `script` in the page and answers what it returns.
    pub async fn eval(&self, script: &str) -> Value {
        self.call(
            reqwest::Method::POST,
            "/execute/sync",
            Some(json!({"script": script, "args": []})),
        )
        .await
    }

    /// The visible text of the page's `<main>`.
    pub async fn main_text(&self) -> String {
        self.eval("return document.querySelector('main').innerText")
            .await
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Waits (up to 10 s) until `<main>` shows every one of `wanted`, and answers its
    /// text; panics with what it shows instead.
    pub async fn wait_for(&self, wanted: &[&str]) -> String {
        let started = Instant::now();
        loop {
            let text = self.main_text().await;
            if wanted.iter().all(|w| text.contains(w)) {
                return text;
            }
            if started.elapsed() > Duration::from_secs(10) {
                panic!("the page never showed {wanted:?}; it shows:\n{text}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The first element matching the CSS `selector`.
    pub async fn find(&self, selector: &str) -> String {
        let v = self
            .call(
                reqwest::Method::POST,
                "/element",
                Some(json!({"using": "css selector", "value": selector})),
            )
            .await;
        v[ELEMENT].as_str().expect("an element").to_string()
    }

    /// Types `text` into the element.
    pub async fn type_into(&self, element: &str, text: &str) {
        self.call(
            reqwest::Method::POST,
            &format!("/element/{element}/value"),
            Some(json!({"text": text})),
        )
        .await;
    }

    /// Clicks the element.
    pub async fn click(&self, element: &str) {
        self.call(
            reqwest::Method::POST,
            &format!("/element/{element}/click"),
            Some(json!({})),
        )
        .await;
    }

    /// Presses keys (WebDriver key codes: `\u{E004}` is Tab, `\u{E007}` Enter) on
    /// whatever has the focus.
    pub async fn press(&self, keys: &[&str]) {
        let mut actions = Vec::new();
        for k in keys {
            actions.push(json!({"type": "keyDown", "value": k}));
            actions.push(json!({"type": "keyUp", "value": k}));
        }
        self.call(
            reqwest::Method::POST,
            "/actions",
            Some(json!({"actions": [{"type": "key", "id": "keyboard", "actions": actions}]})),
        )
        .await;
    }

    /// Resizes the window.
    pub async fn resize(&self, width: u32, height: u32) {
        self.call(
            reqwest::Method::POST,
            "/window/rect",
            Some(json!({"width": width, "height": height})),
        )
        .await;
    }

    /// A PNG of the window, written to `path`.
    pub async fn screenshot(&self, path: &Path) {
        let b64 = self.call(reqwest::Method::GET, "/screenshot", None).await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(b64.as_str().expect("base64"))
            .expect("a PNG");
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).expect("the screenshot folder");
        }
        std::fs::write(path, png).expect("the screenshot is written");
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
