//! The CI recipe of the README: `conformance/ci/run-conformance.sh` runs here against
//! the reference broker, and `conformance/ci/github-workflow.yml` is YAML whose jobs run
//! that same script.
//!
//! The script starts the broker as `$QUEEN_BROKER_BIN --in-memory --listen ADDR`. This
//! test hands it a small wrapper that runs this very test binary in "serve" mode (the
//! test `serve_the_reference_broker_for_the_script`, which serves the in-process
//! reference broker on ADDR when `CF_SERVE_LISTEN` is set, and does nothing otherwise),
//! so the script runs against the workspace's reference broker without a second build.

mod support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use queen_mock_broker::MockBroker;
use serde_json::{Map, Value, json};
use support::scratch;

/// The workspace's root (the script runs from there, as in CI).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .to_path_buf()
}

/// The script's broker when `CF_SERVE_LISTEN` is set (see the module's note); without
/// it there is nothing to serve and it returns at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_the_reference_broker_for_the_script() {
    let Ok(addr) = std::env::var("CF_SERVE_LISTEN") else {
        return;
    };
    let addr: SocketAddr = addr.parse().expect("CF_SERVE_LISTEN is an address");
    let broker = MockBroker::builder()
        .in_memory()
        .listen(addr)
        .start()
        .await
        .expect("the broker starts");
    eprintln!("serving the reference broker at {}", broker.url());
    // The line the script reads the address from, as the broker's binary prints it.
    println!("queen-mock-broker listening on {}", broker.url());
    // The script ends this process when it is done; the cap only guards a lost parent.
    tokio::time::sleep(Duration::from_secs(600)).await;
    broker.shutdown().await;
}

/// A broker binary for the script: a wrapper that records its arguments in
/// `args.txt` beside it, then serves the reference broker on the `--listen` address.
fn wrapper(dir: &Path) -> PathBuf {
    let wrapper = dir.join("broker");
    let me = std::env::current_exe().expect("this test binary");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\n# --in-memory|--data FILE --listen ADDR, as the script starts a broker\necho \"$@\" > '{}'\nwhile [ $# -gt 0 ]; do\n  if [ \"$1\" = --listen ]; then shift; CF_SERVE_LISTEN=\"$1\"; export CF_SERVE_LISTEN; fi\n  shift\ndone\nexec '{}' serve_the_reference_broker_for_the_script --exact --nocapture --test-threads=1\n",
            dir.join("args.txt").display(),
            me.display()
        ),
    )
    .expect("the wrapper");
    chmod_x(&wrapper);
    wrapper
}

fn chmod_x(path: &Path) {
    let chmod = std::process::Command::new("chmod")
        .arg("+x")
        .arg(path)
        .status()
        .expect("chmod");
    assert!(chmod.success());
}

/// What a run of the script did.
struct Script {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    log: String,
}

/// Runs the script from the workspace's root with `env` (and no `QUEEN_*` of ours).
async fn script(env: &[(&str, String)], path_first: Option<&Path>) -> Script {
    let mut cmd = tokio::process::Command::new("bash");
    cmd.arg("conformance/ci/run-conformance.sh")
        .current_dir(root())
        .env_remove("QUEEN_URL")
        .env_remove("QUEEN_TOKEN")
        .env_remove("QUEEN_PORT")
        .env_remove("QUEEN_DATA")
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("QUEEN_CONFORMANCE_CASES")
        .env_remove("QUEEN_CONFORMANCE_BASELINE")
        .env_remove("QUEEN_CONFORMANCE_WRITE_BASELINE");
    if let Some(dir) = path_first {
        let path = std::env::var("PATH").unwrap_or_default();
        cmd.env("PATH", format!("{}:{path}", dir.display()));
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let run = cmd.output().await.expect("bash runs the script");
    let out = env
        .iter()
        .find(|(k, _)| *k == "QUEEN_CONFORMANCE_OUT")
        .map(|(_, v)| PathBuf::from(v))
        .expect("an out folder");
    Script {
        code: run.status.code(),
        stdout: String::from_utf8_lossy(&run.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&run.stderr).into_owned(),
        log: std::fs::read_to_string(out.join("broker.log")).unwrap_or_default(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ci_script_runs_against_the_reference_broker() {
    let dir = scratch("ci-script");
    let wrapper = wrapper(&dir);
    let baseline = dir.join("baseline.txt");
    std::fs::write(&baseline, "# no known failures\n").expect("a baseline");
    let out = dir.join("report");
    let r = script(
        &[
            ("QUEEN_BROKER_BIN", wrapper.display().to_string()),
            (
                "QUEEN_CONFORMANCE_BIN",
                env!("CARGO_BIN_EXE_queen-conformance").to_string(),
            ),
            ("QUEEN_CONFORMANCE_OUT", out.display().to_string()),
            ("QUEEN_CONFORMANCE_BASELINE", baseline.display().to_string()),
            (
                "QUEEN_CONFORMANCE_ARGS",
                "--only core.* --profile queen2-fast".to_string(),
            ),
        ],
        None,
    )
    .await;
    let (stdout, stderr, log) = (&r.stdout, &r.stderr, &r.log);
    assert_eq!(
        r.code,
        Some(0),
        "stdout: {stdout}\nstderr: {stderr}\nbroker log: {log}"
    );
    assert!(log.contains("serving the reference broker"), "{log}");
    // No QUEEN_PORT: the kernel chose a free port, read from the broker's line.
    let port: u16 = log
        .lines()
        .find_map(|l| l.strip_prefix("queen-mock-broker listening on http://127.0.0.1:"))
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("the broker's address: {log}"));
    assert_ne!(port, 6632);
    let args = std::fs::read_to_string(dir.join("args.txt")).expect("the broker's arguments");
    assert_eq!(args.trim(), "--in-memory --listen 127.0.0.1:0");
    let summary = std::fs::read_to_string(out.join("summary.txt")).expect("the summary");
    assert!(summary.contains(" passed, 0 failed, "), "{summary}");
    assert!(
        summary.contains("0 known failure(s) failed again, 0 new"),
        "{summary}"
    );
    assert!(stdout.contains("queen-conformance exited 0"), "{stdout}");
    let junit = std::fs::read_to_string(out.join("junit.xml")).expect("the JUnit report");
    assert!(
        junit.contains("<testsuite name=\"queen-conformance\""),
        "{junit}"
    );
    assert!(junit.contains("failures=\"0\""), "{junit}");
    assert!(junit.contains("name=\"core.cursor.subscription.late-partition\""));
    let md = std::fs::read_to_string(out.join("summary.md")).expect("the Markdown report");
    assert!(
        md.starts_with("### queen-conformance against `http://127.0.0.1:"),
        "{md}"
    );
    assert!(md.contains("**Gate: pass** (baseline"), "{md}");
    // The script stopped the broker it started.
    let closed = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_err()
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    assert!(closed.is_ok(), "the broker still listens on {port}");
}

/// The port is taken by another broker: the script's own broker cannot start, and the
/// script says so (exit 2) instead of gating whatever answers there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ci_script_never_gates_a_broker_it_did_not_start() {
    let other = MockBroker::start_in_memory().await.expect("another broker");
    let port = other.url().rsplit(':').next().expect("a port").to_string();
    let dir = scratch("ci-taken");
    let out = dir.join("report");
    let r = script(
        &[
            ("QUEEN_BROKER_BIN", wrapper(&dir).display().to_string()),
            (
                "QUEEN_CONFORMANCE_BIN",
                env!("CARGO_BIN_EXE_queen-conformance").to_string(),
            ),
            ("QUEEN_CONFORMANCE_OUT", out.display().to_string()),
            ("QUEEN_PORT", port.clone()),
            ("QUEEN_CONFORMANCE_ARGS", "--only core.health".to_string()),
        ],
        None,
    )
    .await;
    assert_eq!(r.code, Some(2), "{}{}\n{}", r.stdout, r.stderr, r.log);
    assert!(
        r.stderr
            .contains("run-conformance.sh: could not run: the broker exited at start"),
        "{}",
        r.stderr
    );
    assert!(!r.stdout.contains("passed"), "no suite ran: {}", r.stdout);
    // A broker that says it listens on a port another process holds (the other
    // broker's): the script compares the port's owner with its broker's pid.
    let liar = dir.join("liar");
    std::fs::write(
        &liar,
        format!(
            "#!/bin/sh
echo 'queen-mock-broker listening on {}'
exec sleep 30
",
            other.url()
        ),
    )
    .expect("a lying broker");
    chmod_x(&liar);
    let r = script(
        &[
            ("QUEEN_BROKER_BIN", liar.display().to_string()),
            (
                "QUEEN_CONFORMANCE_BIN",
                env!("CARGO_BIN_EXE_queen-conformance").to_string(),
            ),
            ("QUEEN_CONFORMANCE_OUT", out.display().to_string()),
            ("QUEEN_CONFORMANCE_ARGS", "--only core.health".to_string()),
        ],
        None,
    )
    .await;
    assert_eq!(r.code, Some(2), "{}{}\n{}", r.stdout, r.stderr, r.log);
    assert!(
        r.stderr.contains(&format!(
            "could not run: port {port} does not answer for the broker this script started"
        )),
        "{}",
        r.stderr
    );
    // A baseline named on purpose that is not there: 2 as well, before anything runs.
    let r = script(
        &[
            ("QUEEN_CONFORMANCE_OUT", out.display().to_string()),
            (
                "QUEEN_CONFORMANCE_BASELINE",
                dir.join("missing.txt").display().to_string(),
            ),
        ],
        None,
    )
    .await;
    assert_eq!(r.code, Some(2), "{}{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("missing.txt does not exist"),
        "{}",
        r.stderr
    );
    other.shutdown().await;
}

/// With `CARGO_TARGET_DIR` set the script finds cargo's builds there (it exited 127
/// looking in target/), and `QUEEN_DATA` runs the broker on a data file. The builds
/// are the ones this test already has: a stand-in `cargo` on PATH builds nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ci_script_reads_cargo_target_dir_and_runs_on_a_data_file() {
    let dir = scratch("ci-target");
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).expect("a bin folder");
    std::fs::write(
        bin.join("cargo"),
        "#!/bin/sh\necho \"stand-in cargo $*\" >&2\n",
    )
    .expect("a stand-in cargo");
    chmod_x(&bin.join("cargo"));
    let target = dir.join("target");
    let release = target.join("release");
    std::fs::create_dir_all(&release).expect("a release folder");
    std::os::unix::fs::symlink(
        env!("CARGO_BIN_EXE_queen-conformance"),
        release.join("queen-conformance"),
    )
    .expect("the suite in the target dir");
    std::fs::copy(wrapper(&dir), release.join("queen-mock-broker")).expect("the broker");
    chmod_x(&release.join("queen-mock-broker"));
    let out = dir.join("report");
    let data = dir.join("data").join("queen.redb");
    let r = script(
        &[
            ("CARGO_TARGET_DIR", target.display().to_string()),
            ("QUEEN_DATA", data.display().to_string()),
            ("QUEEN_CONFORMANCE_OUT", out.display().to_string()),
            ("QUEEN_CONFORMANCE_ARGS", "--only core.health".to_string()),
        ],
        Some(&bin),
    )
    .await;
    assert_eq!(r.code, Some(0), "{}{}\n{}", r.stdout, r.stderr, r.log);
    assert!(
        r.stderr.contains("stand-in cargo build --release"),
        "{}",
        r.stderr
    );
    let args = std::fs::read_to_string(dir.join("args.txt")).expect("the broker's arguments");
    assert_eq!(
        args.trim(),
        format!("--data {} --listen 127.0.0.1:0", data.display())
    );
}

#[test]
fn the_workflow_is_yaml_whose_jobs_run_the_script() {
    let path = root().join("conformance/ci/github-workflow.yml");
    let text = std::fs::read_to_string(&path).expect("the workflow");
    let wf = yaml(&text);
    assert!(wf["name"].is_string(), "{wf:#}");
    assert!(wf["on"].is_object(), "{wf:#}");
    let steps = |job: &str| -> Vec<Value> {
        wf["jobs"][job]["steps"]
            .as_array()
            .unwrap_or_else(|| panic!("job {job} has steps: {wf:#}"))
            .clone()
    };
    let script = "bash conformance/ci/run-conformance.sh";
    for job in ["reference-broker", "queen-engine"] {
        let steps = steps(job);
        assert!(
            steps
                .iter()
                .all(|s| s.get("uses").is_some() || s["run"].is_string()),
            "{job}: each step uses an action or runs a command"
        );
        let runs: Vec<&Value> = steps.iter().filter(|s| s["run"] == json!(script)).collect();
        assert_eq!(runs.len(), 1, "{job} runs the script once: {steps:#?}");
        let upload = steps
            .iter()
            .find(|s| {
                s["uses"]
                    .as_str()
                    .is_some_and(|u| u.starts_with("actions/upload-artifact"))
            })
            .unwrap_or_else(|| panic!("{job} uploads the report"));
        assert_eq!(upload["if"], json!("always()"), "{job}");
        assert!(
            upload["with"]["path"]
                .as_str()
                .is_some_and(|p| p.contains("conformance-report/")),
            "{job}: {upload:#}"
        );
        assert_eq!(
            runs[0]["env"]["QUEEN_CONFORMANCE_OUT"],
            json!("conformance-report")
        );
    }
    // The reference job builds what the script would build, and hands both binaries over.
    let reference = steps("reference-broker");
    assert!(reference.iter().any(|s| s["run"]
        == json!("cargo build --release --locked -p queen-conformance -p queen-mock-broker")));
    let run = reference
        .iter()
        .find(|s| s["run"] == json!(script))
        .expect("the run step");
    assert_eq!(
        run["env"]["QUEEN_BROKER_BIN"],
        json!("target/release/queen-mock-broker")
    );
    // queen-engine: PostgreSQL as a service, the suite pointed at the running engine.
    let engine = &wf["jobs"]["queen-engine"];
    assert_eq!(
        engine["services"]["postgres"]["image"],
        json!("postgres:15")
    );
    let run = steps("queen-engine")
        .into_iter()
        .find(|s| s["run"] == json!(script))
        .expect("the run step");
    assert_eq!(run["env"]["QUEEN_URL"], json!("http://127.0.0.1:6640"));
    // The script's own defaults are the commands the workflow spells out.
    let sh = std::fs::read_to_string(root().join("conformance/ci/run-conformance.sh"))
        .expect("the script");
    for line in [
        "cargo build --release --locked -p queen-conformance",
        "cargo build --release --locked -p queen-mock-broker",
        "--format text --format \"junit=$out/junit.xml\" --format \"markdown=$out/summary.md\"",
        "baseline_args=(--baseline \"$QUEEN_CONFORMANCE_BASELINE\")",
        "baseline_args+=(--write-baseline \"$QUEEN_CONFORMANCE_WRITE_BASELINE\")",
    ] {
        assert!(sh.contains(line), "the script has {line:?}");
    }
    // No file the workflow names is missing from the repository: the engine's baseline
    // is named only behind a check that it exists (it is generated, not shipped).
    for (i, l) in text.lines().enumerate() {
        if let Some(at) = l.find("conformance/ci/") {
            let name: String = l[at..]
                .chars()
                .take_while(|c| !c.is_whitespace() && !matches!(c, '"' | '\'' | ')' | ','))
                .collect();
            let name = name.trim_end_matches(['.', ':']);
            let exists = root().join(name).exists();
            let guarded = l.contains("[ -f ")
                || l.contains("QUEEN_CONFORMANCE_BASELINE=")
                || l.trim_start().starts_with('#')
                || l.contains("::");
            assert!(
                exists || guarded,
                "line {}: {name} is not in the repository: {l}",
                i + 1
            );
        }
    }
    let engine_steps = steps("queen-engine");
    assert!(
        engine_steps
            .iter()
            .all(|s| s["env"]["QUEEN_CONFORMANCE_BASELINE"].is_null()),
        "the engine's baseline is chosen only when it exists"
    );
    // Where PyYAML is installed, it agrees that the file is YAML.
    let py = std::process::Command::new("python3")
        .args(["-c", "import sys, yaml; yaml.safe_load(open(sys.argv[1]))"])
        .arg(&path)
        .output();
    match py {
        Ok(out) if String::from_utf8_lossy(&out.stderr).contains("No module named") => {
            eprintln!("PyYAML is not installed: checked with this test's parser only");
        }
        Ok(out) => assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(_) => eprintln!("no python3: checked with this test's parser only"),
    }
}

// ---------------------------------------------------------------------------------
// A parser for the block YAML a workflow is written in: mappings, sequences, plain
// and quoted scalars, `[a, b]`, block scalars (`|`, `>-`) and comments. It refuses
// what it does not understand (tabs, a line at an unexpected indent), so a malformed
// file fails the test.
// ---------------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct Line {
    indent: usize,
    text: String,
    raw: String,
}

fn yaml(text: &str) -> Value {
    let lines: Vec<Line> = text
        .lines()
        .map(|l| {
            assert!(!l.contains('\t'), "a tab in {l:?}");
            let indent = l.len() - l.trim_start().len();
            Line {
                indent,
                text: strip_comment(l.trim()).trim_end().to_string(),
                raw: l.to_string(),
            }
        })
        .collect();
    let mut p = Parser { lines, at: 0 };
    p.skip_blank();
    let v = p.block(0);
    p.skip_blank();
    assert!(
        p.at == p.lines.len(),
        "unparsed from line {}: {:?}",
        p.at + 1,
        p.lines.get(p.at).map(|l| &l.raw)
    );
    v
}

fn strip_comment(s: &str) -> &str {
    if s.starts_with('#') {
        return "";
    }
    let (mut single, mut double) = (false, false);
    let b = s.as_bytes();
    for i in 0..b.len() {
        match b[i] {
            b'\'' if !double => single = !single,
            b'"' if !single => double = !double,
            b'#' if !single && !double && i > 0 && b[i - 1] == b' ' => return &s[..i],
            _ => {}
        }
    }
    s
}

struct Parser {
    lines: Vec<Line>,
    at: usize,
}

impl Parser {
    fn skip_blank(&mut self) {
        while self.at < self.lines.len() && self.lines[self.at].text.is_empty() {
            self.at += 1;
        }
    }

    fn peek(&mut self) -> Option<&Line> {
        self.skip_blank();
        self.lines.get(self.at)
    }

    fn block(&mut self, indent: usize) -> Value {
        let Some(l) = self.peek() else {
            return Value::Null;
        };
        let (at, dash) = (l.indent, l.text == "-" || l.text.starts_with("- "));
        if dash {
            self.seq(at.max(indent))
        } else {
            self.map(at)
        }
    }

    fn map(&mut self, indent: usize) -> Value {
        let mut m = Map::new();
        while let Some(l) = self.peek() {
            if l.indent < indent {
                break;
            }
            assert_eq!(l.indent, indent, "unexpected indent: {:?}", l.raw);
            if l.text.starts_with("- ") {
                break;
            }
            let text = l.text.clone();
            let (key, rest) =
                split_key(&text).unwrap_or_else(|| panic!("not `key: value`: {text:?}"));
            self.at += 1;
            let value = self.value(indent, rest);
            assert!(
                m.insert(key.to_string(), value).is_none(),
                "key {key} twice"
            );
        }
        Value::Object(m)
    }

    fn seq(&mut self, indent: usize) -> Value {
        let mut items = Vec::new();
        while let Some(l) = self.peek() {
            if l.indent < indent || !(l.text == "-" || l.text.starts_with("- ")) {
                break;
            }
            assert_eq!(l.indent, indent, "unexpected indent: {:?}", l.raw);
            let content = l.text[1..].trim_start().to_string();
            if content.is_empty() {
                self.at += 1;
                items.push(self.block(indent + 1));
            } else if split_key(&content).is_some() {
                // `- key: value` starts a mapping indented past the dash.
                let inner = indent + (l.text.len() - content.len());
                let line = &mut self.lines[self.at];
                line.indent = inner;
                line.text = content;
                items.push(self.map(inner));
            } else {
                self.at += 1;
                items.push(scalar(&content));
            }
        }
        Value::Array(items)
    }

    fn value(&mut self, indent: usize, rest: &str) -> Value {
        match rest {
            "" => match self.peek() {
                Some(l) if l.indent > indent => {
                    let i = l.indent;
                    self.block(i)
                }
                Some(l) if l.indent == indent && l.text.starts_with("- ") => self.seq(indent),
                _ => Value::Null,
            },
            "|" | "|-" | ">" | ">-" => {
                let mut body = Vec::new();
                while self.at < self.lines.len() {
                    let l = &self.lines[self.at];
                    if !l.raw.trim().is_empty() && l.indent <= indent {
                        break;
                    }
                    body.push(l.raw.clone());
                    self.at += 1;
                }
                while body.last().is_some_and(|l| l.trim().is_empty()) {
                    body.pop();
                }
                let cut = body
                    .iter()
                    .filter(|l| !l.trim().is_empty())
                    .map(|l| l.len() - l.trim_start().len())
                    .min()
                    .unwrap_or(0);
                let body: Vec<&str> = body.iter().map(|l| l.get(cut..).unwrap_or("")).collect();
                let sep = if rest.starts_with('|') { "\n" } else { " " };
                Value::String(body.join(sep))
            }
            s => scalar(s),
        }
    }
}

/// `key: rest` (or `key:`), with a plain or quoted key.
fn split_key(text: &str) -> Option<(&str, &str)> {
    if text.starts_with('[') || text.starts_with('{') {
        return None;
    }
    let end = if let Some(q) = text.strip_prefix('"') {
        q.find('"').map(|i| i + 2)?
    } else if let Some(q) = text.strip_prefix('\'') {
        q.find('\'').map(|i| i + 2)?
    } else {
        text.find(": ")
            .or_else(|| text.ends_with(':').then(|| text.len() - 1))?
    };
    let (key, rest) = text.split_at(end);
    let rest = rest.strip_prefix(':')?;
    if !(rest.is_empty() || rest.starts_with(' ')) {
        return None;
    }
    Some((key.trim_matches(|c| c == '"' || c == '\''), rest.trim()))
}

fn scalar(s: &str) -> Value {
    if let Some(inner) = s.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
        return Value::Array(
            inner
                .split(',')
                .map(str::trim)
                .filter(|x| !x.is_empty())
                .map(scalar)
                .collect(),
        );
    }
    for q in ['"', '\''] {
        if s.len() >= 2 && s.starts_with(q) && s.ends_with(q) {
            return Value::String(s[1..s.len() - 1].to_string());
        }
    }
    Value::String(s.to_string())
}

#[test]
fn the_yaml_parser_reads_what_workflows_are_made_of() {
    let v = yaml(
        "# c\nname: x\non:\n  push:\n    branches: [main]\njobs:\n  a:\n    steps:\n      - uses: u@v1 # c\n      - name: \"n\"\n        run: |\n          one\n          two\n        env:\n          K: 'v'\n    options: >-\n      --a\n      --b\n",
    );
    assert_eq!(v["on"]["push"]["branches"], json!(["main"]));
    assert_eq!(v["jobs"]["a"]["steps"][0]["uses"], json!("u@v1"));
    assert_eq!(v["jobs"]["a"]["steps"][1]["run"], json!("one\ntwo"));
    assert_eq!(v["jobs"]["a"]["steps"][1]["env"]["K"], json!("v"));
    assert_eq!(v["jobs"]["a"]["options"], json!("--a --b"));
}
