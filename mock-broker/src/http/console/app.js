// The broker console: plain JavaScript over the broker's own API, with the caller's
// bearer token, so the page sees exactly what that token's tenant and role may see.
// No build step: this file is embedded in the broker binary as it is.
'use strict';
(() => {
  const TOKEN_KEY = 'queen.console.token';
  const REFRESH_MS = 2000;
  const $ = (id) => document.getElementById(id);
  const view = $('view');
  const enc = encodeURIComponent;
  let token = sessionStorage.getItem(TOKEN_KEY) || '';
  let me = null; // {tenant, role, sub, auth}
  let shown = ''; // the HTML on screen, to skip a refresh that changes nothing
  let busy = false;
  let again = null; // a render asked for while one ran: {moved}
  const seen = new Map(); // queue -> {total, at}: throughput between refreshes

  const esc = (v) => String(v ?? '').replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);
  const json = (v) => `<pre>${esc(typeof v === 'string' ? v : JSON.stringify(v, null, 2))}</pre>`;
  const time = (iso) => (iso ? `<time datetime="${esc(iso)}">${esc(iso.replace('T', ' ').replace(/\.\d+Z$/, 'Z'))}</time>` : '—');
  const num = (n) => (n === null || n === undefined ? '—' : Number(n).toLocaleString('en'));
  const canWrite = () => me && (me.role === 'read-write' || me.role === 'admin');

  class HttpError extends Error {
    constructor(status, body) {
      super((body && body.error) || `HTTP ${status}`);
      this.status = status;
      this.code = body && body.code;
    }
  }

  // Every request the page makes is one of these: reads, and the two actions its
  // Retry and Delete buttons take. A path is built from encoded segments, then checked
  // against this list and against what the browser makes of it (a segment `..` would
  // be resolved away: /api/v1/messages/../pop is GET /api/v1/pop, a pop), so no route
  // argument can turn the page into a caller of another route.
  const SEG = '[^/?#]+';
  const READS = [
    '/console/whoami',
    '/api/v1/status/queues',
    `/api/v1/resources/queues/${SEG}`,
    '/api/v1/resources/partitions',
    '/api/v1/consumer-groups',
    '/api/v1/messages',
    `/api/v1/messages/${SEG}/${SEG}`,
    '/api/v1/transactions',
    '/api/v1/dlq',
    '/api/v1/kv',
    `/api/v1/kv/${SEG}`,
    '/api/v1/timers',
    `/api/v1/timers/${SEG}`,
    '/api/v1/timer-log',
  ].map((p) => new RegExp(`^${p}$`));
  const ACTIONS = {
    POST: [new RegExp(`^/api/v1/messages/${SEG}/${SEG}/retry$`)],
    DELETE: [new RegExp(`^/api/v1/messages/${SEG}/${SEG}$`)],
  };

  // Whether `path` (with its query) is a request the page means to make with `method`.
  function allowed(path, method) {
    const bare = path.split('?')[0];
    const url = new URL(path, location.origin);
    if (url.origin !== location.origin || url.pathname !== bare) return false;
    if (bare.split('/').some((s) => /^(\.|%2e){1,2}$/i.test(s))) return false;
    const list = method === 'GET' ? READS : ACTIONS[method] || [];
    return list.some((re) => re.test(bare));
  }

  async function api(path, method = 'GET') {
    if (!allowed(path, method)) throw new HttpError(400, { error: `the console does not send ${method} ${path}` });
    const headers = { Accept: 'application/json' };
    if (token) headers.Authorization = `Bearer ${token}`;
    const res = await fetch(path, { method, headers, cache: 'no-store' });
    const text = await res.text();
    let body = null;
    try { body = text ? JSON.parse(text) : null; } catch (_) { body = null; }
    if (!res.ok) throw new HttpError(res.status, body);
    return body;
  }

  // A table with a caption; `cols` are [label, numeric?]; cells are HTML already escaped.
  function table(caption, cols, rows, empty) {
    if (!rows.length) return `<p class="empty">${esc(empty)}</p>`;
    const head = cols.map(([l, n]) => `<th scope="col"${n ? ' class="n"' : ''}>${esc(l)}</th>`).join('');
    const body = rows.map((r) => `<tr>${r.map((c, i) => (i === 0 ? `<th scope="row">${c}</th>` : `<td${cols[i] && cols[i][1] ? ' class="n"' : ''}>${c}</td>`)).join('')}</tr>`).join('');
    return `<div class="scroll"><table><caption>${esc(caption)}</caption><thead><tr>${head}</tr></thead><tbody>${body}</tbody></table></div>`;
  }

  const facts = (pairs) => `<dl class="facts">${pairs.map(([k, v]) => `<dt>${esc(k)}</dt><dd>${v}</dd>`).join('')}</dl>`;
  const msgLink = (pid, tx, label) => (pid && tx ? `<a href="#/message/${enc(pid)}/${enc(tx)}">${esc(label || tx)}</a>` : esc(label || tx || '—'));

  // ---- views: each answers {section, title, html} ----

  async function queues() {
    // The cheap status counts (kept as messages move), not the full scan of
    // /api/v1/resources/queues: this page is open most, and polled.
    const { queues: qs, total } = await api('/api/v1/status/queues?limit=1000');
    const now = Date.now();
    const rows = qs.map((q) => {
      const m = q.messages;
      const before = seen.get(q.name);
      seen.set(q.name, { total: m.total, at: now });
      const rate = before && now > before.at ? ((m.total - before.total) * 1000) / (now - before.at) : null;
      return [
        `<a href="#/queue/${enc(q.name)}" data-key="q:${esc(q.name)}">${esc(q.name)}</a>`,
        num(q.partitions), num(m.pending), num(m.processing), num(m.total),
        rate === null ? '—' : `${rate.toFixed(1)}/s`,
      ];
    });
    const more = total > qs.length ? `<p>The first ${num(qs.length)} of ${num(total)} queues.</p>` : '';
    return {
      section: 'queues',
      title: 'Queues',
      html: `<h2>Queues</h2>${more}${table('Every queue of your tenant (open one for its partitions, groups and dead letters)', [['Queue'], ['Partitions', 1], ['Pending', 1], ['Processing', 1], ['Stored', 1], ['Pushed', 1]], rows, 'No queues yet: push a message to create one.')}`,
    };
  }

  // A queue's full detail (its configuration and each partition's counts by state) is a
  // scan of the whole queue: read once when its page opens, not at every refresh. The
  // refreshed figures come from reads that cost no scan (watermarks, cursors).
  let detail = { name: null, at: null, data: null };

  async function queue(name) {
    if (detail.name !== name) {
      detail = { name, at: null, data: await api(`/api/v1/resources/queues/${enc(name)}`) };
      detail.at = new Date();
    }
    const q = detail.data;
    const [live, groups] = await Promise.all([
      api(`/api/v1/resources/partitions?queue=${enc(name)}&limit=1000`),
      api('/api/v1/consumer-groups'),
    ]);
    const byName = new Map(q.partitions.map((p) => [p.name, p]));
    const parts = live.partitions
      .slice()
      .sort((a, b) => a.partition.localeCompare(b.partition))
      .map((p) => {
        const d = byName.get(p.partition);
        return [
          `<a href="#/messages/${enc(name)}/${enc(p.partition)}" data-key="p:${esc(p.partition)}">${esc(p.partition)}</a>`,
          esc(p.id), num(p.pending), num(p.processing), p.lagSeconds === null ? 'caught up' : `${num(p.lagSeconds)} s`,
          d ? num(d.stats.completed) : '—', d ? num(d.stats.deadLetter) : '—', d ? num(d.consumerGroups) : '—',
        ];
      });
    const gs = groups.filter((g) => g.queueName === name).map((g) => [
      esc(g.name === '__QUEUE_MODE__' ? '__QUEUE_MODE__ (competing consumers)' : g.name),
      num(g.members), num(g.partitionsWithLag), num(g.totalLag), g.maxTimeLag === null ? '—' : `${num(g.maxTimeLag)} s`, esc(g.state),
    ]);
    const t = q.totals;
    return {
      section: 'queues',
      title: `Queue ${name}`,
      html: `<p class="crumbs"><a href="#/queues">Queues</a> › ${esc(name)}</p><h2>Queue ${esc(name)}</h2>
${facts([['Lease time', `${num(q.config.leaseTime)} s`], ['Retry limit', num(q.config.retryLimit)], ['Created', time(q.createdAt)], [`When the page opened (${esc(detail.at.toLocaleTimeString('en-GB'))})`, `${num(t.total)} stored: completed ${num(t.completed)}, dead letters ${num(t.deadLetter)}`]])}
<h3>Partitions</h3>${table(`Partitions of ${name} (completed and dead letters as when the page opened)`, [['Partition'], ['Id'], ['Pending', 1], ['Processing', 1], ['Oldest unread'], ['Completed', 1], ['Dead letters', 1], ['Groups', 1]], parts, 'No partitions.')}
<h3>Consumer groups</h3>${table(`Consumer groups reading ${name}`, [['Group'], ['Partitions read', 1], ['Partitions behind', 1], ['Lag (messages)', 1], ['Oldest unread'], ['State']], gs, 'No group has read this queue yet.')}`,
    };
  }

  async function messages(qname, partition) {
    const page = await api(`/api/v1/messages?queue=${enc(qname)}&partition=${enc(partition)}&limit=100`);
    const rows = page.messages.map((m) => [
      num(m.offset), msgLink(m.partitionId, m.transactionId), esc(m.status.replace('_', ' ')), time(m.createdAt), time(m.leaseExpiresAt),
    ]);
    return {
      section: 'queues',
      title: `${qname}/${partition}`,
      html: `<p class="crumbs"><a href="#/queues">Queues</a> › <a href="#/queue/${enc(qname)}">${esc(qname)}</a> › ${esc(partition)}</p>
<h2>Messages of ${esc(qname)}/${esc(partition)}</h2>${table('Newest first (at most 100)', [['Offset', 1], ['Transaction id'], ['Status'], ['Created'], ['Lease expires']], rows, 'No messages stored in this partition.')}`,
    };
  }

  async function message(pid, tx) {
    const [m, log] = await Promise.all([
      api(`/api/v1/messages/${enc(pid)}/${enc(tx)}`),
      api('/api/v1/transactions?limit=256').catch(() => ({ transactions: [] })),
    ]);
    const groups = (m.consumerGroups || []).map((g) => [
      esc(g.name), esc(g.status.replace('_', ' ')), g.consumed ? 'yes' : 'no', num(g.cursor), num(g.deliveryAttempts), num(g.failures), time(g.leaseExpiresAt),
    ]);
    const touched = (log.transactions || []).filter((t) => parts(t).some((p) => p.partitionId === pid && p.transactionId === tx));
    return {
      section: 'queues',
      title: `Message ${tx}`,
      html: `<p class="crumbs"><a href="#/queues">Queues</a> › <a href="#/queue/${enc(m.queue)}">${esc(m.queue)}</a> › <a href="#/messages/${enc(m.queue)}/${enc(m.partition)}">${esc(m.partition)}</a> › ${esc(tx)}</p>
<h2>Message ${esc(tx)}</h2>
${facts([['Queue / partition', `${esc(m.queue)} / ${esc(m.partition)} (id ${esc(m.partitionId)})`], ['Offset', num(m.offset)], ['Status', esc(m.status.replace('_', ' '))], ['Attempts failed', num(m.retryCount)], ['Created', time(m.createdAt)], ['Producer', esc(m.producerSub || '—')]])}
<h3>Payload</h3>${json(m.payload)}
<h3>Per consumer group</h3>${table('Where it stands for each group', [['Group'], ['Status'], ['Consumed'], ['Cursor', 1], ['Deliveries', 1], ['Failures', 1], ['Lease expires']], groups, 'No group has a cursor on its partition.')}
<h3>Transactions that touched it</h3>${touched.length ? touched.map(txEntry).join('') : '<p class="empty">None in the recent transaction log.</p>'}`,
    };
  }

  async function dlq() {
    const page = await api('/api/v1/dlq?limit=100');
    const write = canWrite();
    const rows = page.messages.map((d) => {
      const key = `${d.partitionId}/${d.transactionId}`;
      const actions = write
        ? `<button type="button" data-action="retry" data-pid="${esc(d.partitionId)}" data-tx="${esc(d.transactionId)}" data-key="retry:${esc(key)}" aria-label="Retry ${esc(d.transactionId)}">Retry</button><button type="button" data-action="delete" data-pid="${esc(d.partitionId)}" data-tx="${esc(d.transactionId)}" data-key="delete:${esc(key)}" aria-label="Delete ${esc(d.transactionId)}">Delete</button>`
        : '<span class="empty">read-only</span>';
      return [msgLink(d.partitionId, d.transactionId), `${esc(d.queue)} / ${esc(d.partition)}`, esc(d.consumerGroup), esc(d.errorMessage || '—'), num(d.retryCount), time(d.failedAt), json(d.data), actions];
    });
    return {
      section: 'dlq',
      title: 'Dead letters',
      html: `<h2>Dead letters</h2><p>${num(page.total)} in all.</p>${table('The most recent 100', [['Transaction id'], ['Queue / partition'], ['Group'], ['Reason'], ['Failures', 1], ['Failed at'], ['Payload'], ['Actions']], rows, 'No dead letters.')}`,
    };
  }

  async function kvNamespaces() {
    const { namespaces } = await api('/api/v1/kv');
    const rows = namespaces.map((n) => [`<a href="#/kv/${enc(n.ns)}" data-key="ns:${esc(n.ns)}">${esc(n.ns)}</a>`, num(n.keys)]);
    return { section: 'kv', title: 'KV', html: `<h2>KV namespaces</h2>${table('Namespaces with live keys', [['Namespace'], ['Keys', 1]], rows, 'No KV rows.')}` };
  }

  async function kvRows(ns) {
    const page = await api(`/api/v1/kv/${enc(ns)}?limit=200`);
    const rows = page.rows.map((r) => [esc(r.key), json(r.value), num(r.version), r.expiresAt ? time(r.expiresAt) : 'never', time(r.updatedAt)]);
    return {
      section: 'kv',
      title: `KV ${ns}`,
      html: `<p class="crumbs"><a href="#/kv">KV</a> › ${esc(ns)}</p><h2>KV namespace ${esc(ns)}</h2>${table(page.truncated ? 'The first 200 keys' : 'Every live key', [['Key'], ['Value'], ['Version', 1], ['Expires'], ['Updated']], rows, 'No live keys.')}`,
    };
  }

  // Fired and cancelled timers are deleted from storage: the broker keeps the last ones
  // of each tenant in memory (GET /api/v1/timer-log), shown under the pending ones.
  function ended(log, withQueue) {
    const rows = (log.timers || []).map((t) => [
      esc(t.timerKey),
      ...(withQueue ? [`<a href="#/timers/${enc(t.queue)}" data-key="etq:${esc(t.seq)}">${esc(t.queue)}</a>`] : []),
      t.end === 'fired' ? 'Fired' : 'Cancelled',
      time(t.at), time(t.deliverAt), esc(t.partition), esc(t.txn),
    ]);
    const cols = [['Key'], ...(withQueue ? [['Queue']] : []), ['Ended'], ['At'], ['Was due'], ['Partition'], ['Transaction']];
    return `<h3>Recently fired or cancelled</h3>${table(`Newest first (the broker keeps the last ${num(log.kept)} in memory; a restart forgets them)`, cols, rows, 'None fired or cancelled since the broker started.')}`;
  }

  async function timerQueues() {
    const [{ queues: qs }, log] = await Promise.all([api('/api/v1/timers'), api('/api/v1/timer-log?limit=50')]);
    const rows = qs.map((q) => [`<a href="#/timers/${enc(q.queue)}" data-key="tq:${esc(q.queue)}">${esc(q.queue)}</a>`, num(q.pending), time(q.nextDeliverAt)]);
    return { section: 'timers', title: 'Timers', html: `<h2>Timers</h2><h3>Pending</h3>${table('Timer queues with pending timers', [['Queue'], ['Pending', 1], ['Next delivery']], rows, 'No pending timers.')}${ended(log, true)}` };
  }

  async function timerRows(q) {
    const [page, log] = await Promise.all([api(`/api/v1/timers/${enc(q)}?limit=200`), api(`/api/v1/timer-log?queue=${enc(q)}&limit=100`)]);
    const rows = page.rows.map((t) => [esc(t.timerKey), time(t.deliverAt), esc(t.partition), num(t.attempts), esc(t.txn)]);
    return {
      section: 'timers',
      title: `Timers ${q}`,
      html: `<p class="crumbs"><a href="#/timers">Timers</a> › ${esc(q)}</p><h2>Timers of ${esc(q)}</h2><h3>Pending</h3>${table('Pending, by key', [['Key'], ['Delivers at'], ['Partition'], ['Attempts', 1], ['Transaction']], rows, 'No pending timers.')}${ended(log, false)}`,
    };
  }

  // A logged list: {items, more} (the rest cut off, counted).
  const items = (l) => (l && l.items) || [];

  // The parts of a logged transaction that name a message: its acks and pushes.
  function parts(t) {
    return [...items(t.acks), ...items(t.pushes)];
  }

  // The KV operation a rollback lost when it is a `putIfAbsent` on a key that exists: a
  // `once` gate, or the SDK's own step marker (namespace `queen.steps`), found its marker
  // set, so the step was done before; not an error. `failedIndex` counts the acks and
  // the pushed items before the KV operations (the log keeps the first 16 of each list
  // and counts the rest, so the index still lands).
  function lostGate(t) {
    const o = t.outcome || {};
    if (o.status !== 'rolled_back' || o.reason !== 'kv_precondition' || o.kvReason !== 'exists' || typeof o.failedIndex !== 'number') return null;
    const op = items(t.kv)[o.failedIndex - count(t.acks) - count(t.pushes)];
    return op && op.op === 'putIfAbsent' && op.key ? op : null;
  }

  function outcome(t) {
    const o = t.outcome || {};
    const gate = lostGate(t);
    if (gate) {
      return gate.ns === 'queen.steps'
        ? `Already done: an earlier attempt of this step committed (the SDK's step marker ${gate.ns}/${gate.key} is set); nothing written again`
        : `Already done: the once marker ${gate.ns}/${gate.key} is set; nothing written again`;
    }
    switch (o.status) {
      case 'committed': return 'Committed';
      case 'rolled_back': return `Rolled back: ${o.reason || 'no reason given'}${o.kvReason ? ` (${o.kvReason})` : ''}${o.error ? ` — ${o.error}` : ''}`;
      case 'refused': return `Refused (${o.httpStatus || '4xx'}${o.code ? ` ${o.code}` : ''})${o.error ? `: ${o.error}` : ''}`;
      default: return o.status || 'unknown';
    }
  }

  function list(l, render) {
    const xs = items(l);
    if (!xs.length) return '<span class="empty">none</span>';
    return `<ul>${xs.map((i) => `<li>${render(i)}</li>`).join('')}${l.more ? `<li>and ${num(l.more)} more</li>` : ''}</ul>`;
  }

  const count = (l) => items(l).length + ((l && l.more) || 0);

  function txEntry(t) {
    const acks = list(t.acks, (a) => `ack ${esc(a.status || 'completed')} ${msgLink(a.partitionId, a.transactionId)} (${esc(a.queue || '?')}/${esc(a.partition || '?')}${a.consumerGroup ? `, group ${esc(a.consumerGroup)}` : ''})`);
    const pushes = list(t.pushes, (p) => `push ${msgLink(p.partitionId, p.transactionId)} to ${esc(p.queue)}/${esc(p.partition || 'Default')}${p.offset !== undefined && p.offset !== null ? ` at offset ${num(p.offset)}` : ''}${p.duplicate ? ' (duplicate: not stored again)' : ''}`);
    const kv = list(t.kv, (k) => `${esc(k.op)} ${esc(k.ns)}/${esc(k.key)}`);
    const timers = list(t.timers, (x) => `${esc(x.op)} ${esc(x.queue)}/${esc(x.timerKey)}`);
    const positions = list(t.positions, (p) => `${esc(p.consumerGroup)} on ${esc(p.queue)}/${esc(p.partition)} to offset ${num(p.offset)}`);
    return `<details data-key="tx:${esc(t.seq)}"><summary><span class="outcome">${esc(outcome(t))}</span> — #${esc(t.seq)}${t.id ? ` (${esc(t.id)})` : ''} at ${time(t.at)}: ${num(count(t.acks))} ack(s), ${num(count(t.pushes))} push(es), ${num(count(t.kv))} KV op(s), ${num(count(t.timers))} timer(s)${t.userAgent ? `, from ${esc(t.userAgent)}` : ''}</summary>
${facts([['Acks', acks], ['Pushes', pushes], ['KV', kv], ['Timers', timers], ['Positions', positions]])}</details>`;
  }

  async function transactions() {
    const log = await api('/api/v1/transactions?limit=50');
    const items = log.transactions || [];
    return {
      section: 'transactions',
      title: 'Transactions',
      html: `<h2>Transactions</h2><p>The most recent <code>POST /api/v1/transaction</code> calls of your tenant, newest first (kept in memory: a restart forgets them). Open one to see its parts.</p>${items.length ? items.map(txEntry).join('') : '<p class="empty">No transaction yet.</p>'}`,
    };
  }

  const routes = [
    [/^#?\/?(queues)?$/, queues],
    [/^#\/queue\/([^/]+)$/, queue],
    [/^#\/messages\/([^/]+)\/([^/]+)$/, messages],
    [/^#\/message\/([^/]+)\/(.+)$/, message],
    [/^#\/dlq$/, dlq],
    [/^#\/kv$/, kvNamespaces],
    [/^#\/kv\/([^/]+)$/, kvRows],
    [/^#\/timers$/, timerQueues],
    [/^#\/timers\/([^/]+)$/, timerRows],
    [/^#\/transactions$/, transactions],
  ];

  function tokenForm(why) {
    return `<h2>Sign in</h2><p>${esc(why)}</p>
<form class="token" id="token-form"><label for="token">Bearer token</label>
<input id="token" name="token" type="password" autocomplete="off" required>
<button type="submit">Use this token</button></form>
<p class="empty">The token stays in this tab (session storage) and is sent only to this broker.</p>`;
  }

  function paint(html) {
    if (html === shown) return;
    // Keep keyboard focus across a refresh: by the element's data-key.
    const focused = document.activeElement && view.contains(document.activeElement) ? document.activeElement.getAttribute('data-key') : null;
    const open = [...view.querySelectorAll('details[open]')].map((d) => d.getAttribute('data-key'));
    view.innerHTML = html;
    shown = html;
    for (const k of open) {
      const d = view.querySelector(`details[data-key="${CSS.escape(k || '')}"]`);
      if (d) d.open = true;
    }
    if (focused) {
      const el = view.querySelector(`[data-key="${CSS.escape(focused)}"]`);
      if (el) el.focus();
    }
  }

  async function whoami() {
    try {
      me = await api('/console/whoami');
      $('who').textContent = me.auth ? `Tenant ${me.tenant}, role ${me.role}${me.sub ? ` (${me.sub})` : ''}` : `Authentication off: tenant ${me.tenant}, role ${me.role}`;
      if (me.auth) {
        const out = document.createElement('button');
        out.type = 'button';
        out.textContent = 'Sign out';
        out.addEventListener('click', () => { sessionStorage.removeItem(TOKEN_KEY); token = ''; me = null; shown = ''; render(); });
        $('who').append(' ', out);
      }
      return true;
    } catch (e) {
      me = null;
      $('who').textContent = 'Not signed in';
      if (e.status === 401) { paint(tokenForm(token ? 'The broker refused that token.' : 'This broker asks for a token: the console shows what the token\'s tenant and role may see.')); return false; }
      throw e;
    }
  }

  // The arguments of a route's address, decoded; `null` when one is not a name the
  // page may put in a request: `.` or `..` (a path segment the browser resolves away),
  // or one holding `/`, `?`, `#`, a backslash or a control character once decoded, or a
  // malformed escape.
  function routeArgs(raw) {
    try {
      const args = raw.map(decodeURIComponent);
      const bad = (a) => a === '' || a === '.' || a === '..' || /[/?#\\\u0000-\u001f\u007f]/.test(a);
      return args.some(bad) ? null : args;
    } catch (_) {
      return null;
    }
  }

  async function render(moved) {
    if (busy) { again = { moved: moved || (again && again.moved) }; return; }
    busy = true;
    try {
      if (!me && !(await whoami())) return;
      const hash = location.hash || '#/queues';
      const route = routes.find(([re]) => re.test(hash));
      if (!route) { paint(`<h2>Not found</h2><p>No page at ${esc(hash)}. <a href="#/queues">Queues</a>.</p>`); return; }
      const args = routeArgs(hash.match(route[0]).slice(1).filter((a) => a !== undefined && a !== 'queues'));
      if (!args) { paint(`<h2>Not a valid address</h2><p>${esc(hash)} names no queue, partition, message, namespace or timer queue. <a href="#/queues">Queues</a>.</p>`); return; }
      const page = await route[1](...args);
      document.title = `${page.title} · Queen broker console`;
      for (const a of document.querySelectorAll('nav a')) {
        if (a.dataset.section === page.section) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
      }
      paint(page.html);
      $('updated').textContent = `Updated ${new Date().toLocaleTimeString('en-GB')}`;
    } catch (e) {
      if (e.status === 401) { me = null; await whoami().catch(() => {}); return; }
      const why = e.status === 403 ? 'Your token\'s role may not read this.' : e.status === 404 ? 'Not found (or not your tenant\'s).' : e.message;
      paint(`<h2>Cannot show this page</h2><p>${esc(why)}</p><p><a href="#/queues">Back to the queues</a></p>`);
    } finally {
      busy = false;
      if (moved) view.focus();
      if (again) { const next = again; again = null; shown = ''; render(next.moved); }
    }
  }

  view.addEventListener('submit', async (ev) => {
    if (ev.target.id !== 'token-form') return;
    ev.preventDefault();
    token = ev.target.elements.token.value.trim();
    sessionStorage.setItem(TOKEN_KEY, token);
    me = null;
    shown = '';
    await render(true);
  });

  view.addEventListener('click', async (ev) => {
    const b = ev.target.closest('button[data-action]');
    if (!b) return;
    const { action, pid, tx } = b.dataset;
    if (action === 'delete' && !window.confirm(`Delete the dead letter ${tx}?`)) return;
    try {
      const r = action === 'retry'
        ? await api(`/api/v1/messages/${enc(pid)}/${enc(tx)}/retry`, 'POST')
        : await api(`/api/v1/messages/${enc(pid)}/${enc(tx)}`, 'DELETE');
      $('notice').textContent = `${tx}: ${r.message}`;
    } catch (e) {
      $('notice').textContent = `${tx}: ${e.status === 403 ? 'your role may not do that' : e.message}`;
    }
    shown = '';
    await render();
  });

  window.addEventListener('hashchange', () => { shown = ''; detail = { name: null, at: null, data: null }; render(true); });
  setInterval(() => {
    // Signed in only: a page waiting for a token asks nothing of the broker.
    if (me && $('live').checked && document.visibilityState === 'visible') render();
  }, REFRESH_MS);
  render();
})();
