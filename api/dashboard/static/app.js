// greffe dashboard. Plain JavaScript, no dependency, no build step.
//
// The page reads the node's JSON APIs and follows the log over the SSE
// endpoint. It refreshes the read models when an event arrives (debounced,
// asking for a read model that includes that event with min_position), and
// every refreshSeconds anyway: the timed read models (readiness,
// approvals) change with the clock, not only with the log.
'use strict';

(() => {
  const TOKEN_KEY = 'greffe.token';
  const refreshSeconds = 15;
  // A refresh re-reads every read model: under a busy log, at most one per
  // second, and never two at once.
  const debounceMillis = 1000;
  // New tail rows are drawn in batches, so that thousands of events a
  // second cost the browser a few DOM updates, not thousands.
  const tailFlushMillis = 100;
  const tailBacklog = 50; // events shown on load, before the live ones
  const tailMax = 200; // rows kept in the tail
  const reconnectMillis = 2000;
  // Command clock and wall clock further apart than this are called out.
  const clockGapMillis = 10 * 60 * 1000;

  // Every readiness state the node states (aggregates/readiness.go), its
  // group and what it means. A state's colour is in style.css (.st-NAME),
  // its group sets its icon (.g-GROUP), and every cell also writes the
  // state's name: states stay apart without colour. A state this table
  // does not know gets a dark colour derived from its name (still white
  // text at more than 4.5:1) and the icon of its readiness.
  const stateInfo = {
    configured: ['ready', 'endpoint, exact model tag and limits are declared'],
    live_proven: ['ready', 'the newest probe listed the exact model tag, within the freshness window'],
    activation_ready: ['ready', 'configured, activated and live-proven (and bound, when the profile requires a binding)'],
    direct_reply_only: ['ready', 'a configured endpoint scoped to direct replies: eligible for a reply, not for a mission\'s exact gate'],
    bound: ['ready', 'a verified binding of this exact model'],
    no_binding_required: ['ready', 'the profile needs no binding'],
    not_probed: ['absent', 'no models or smoke probe has been recorded'],
    not_activated: ['absent', 'never activated (or the activation ended with a redeclaration)'],
    provider_unknown: ['absent', 'no provider is declared under this name'],
    provider_dormant: ['absent', 'the provider is dormant: it is never selected'],
    unknown: ['absent', 'the column is absent from the read model'],
    stale: ['stale', 'the newest ok probe is older than the freshness window, or the probe schedule was missed'],
    failed: ['probe', 'the newest probe failed'],
    probe_unsigned: ['absent', 'only probes stated by a writer exist: a probe proves something only signed by a registered key (an executor\'s measurement)'],
    probe_refused: ['absent', 'the executor\'s host policy refused the newest probe: nothing was dialled, so the runtime\'s state is unknown (not a failure of the runtime)'],
    unreachable: ['probe', 'the newest probe could not reach the endpoint'],
    timeout: ['probe', 'the newest probe timed out'],
    tag_not_listed: ['probe', 'the newest probe does not list the exact model tag'],
    alias_not_exact: ['probe', 'the newest probe lists an alias of the tag, not the tag itself: an alias proves nothing about what is loaded'],
    endpoint_missing: ['config', 'the declaration sets no endpoint'],
    model_tag_missing: ['config', 'the declaration sets no exact model tag'],
    limits_unknown: ['config', 'context and output limits are not declared'],
    binding_unknown: ['binding', 'no binding was proposed under the id the activation names'],
    binding_rejected: ['binding', 'the binding was rejected'],
    binding_invalidated: ['binding', 'the binding was invalidated'],
    binding_not_verified: ['binding', 'the binding is not verified'],
    binding_provider_mismatch: ['binding', 'the binding was proposed for another provider'],
    binding_model_mismatch: ['binding', 'the binding identifies another model: an override never inherits another model\'s identity'],
    binding_required: ['binding', 'the profile requires a verified binding and the activation names none'],
    identity_mismatch: ['binding', 'the binding\'s identity differs from the one the activation recorded'],
  };
  const groupNames = {
    ready: '✓ ready', absent: '○ absent or not done yet', stale: '◷ stale', probe: '✗ the newest probe failed',
    config: '⚠ configuration incomplete', binding: '⊘ binding problems',
  };
  // Explanations of the measurement series that name no model.
  const seriesNotes = {
    none: 'none: the GPU held no model when it was measured',
    unobserved: 'unobserved: the executor could not tell which models were resident',
  };
  const matrixColumns = [
    ['configuration_ready', 'configuration'],
    ['eligible_for_attempt', 'eligible'],
    ['live_proven', 'live'],
    ['activation_ready', 'activation'],
  ];
  // Series colours carry white legend text: each passes 4.5:1.
  const seriesColours = ['#1565c0', '#c62828', '#2e7d32', '#6a1b9a', '#b34700', '#00727d'];

  let token = sessionStorage.getItem(TOKEN_KEY) || '';
  let tailAbort = null;
  let lastPosition = 0; // the log size the page has seen events up to
  let refreshTimer = null;
  let debounce = null;
  let refreshing = false; // a refresh is running
  let again = false; // an event arrived during it: refresh once more
  let tailQueue = []; // events waiting to be drawn, oldest first, at most tailMax
  let tailTimer = null;
  let lastInfo = null; // the node's latest /v1/info answer
  let selected = null; // {provider, column} of the cell shown in #detail

  const $ = (sel, root = document) => root.querySelector(sel);

  // el builds an element: attrs may hold class, text, title, dataset and
  // any other attribute; children are nodes or strings.
  function el(tag, attrs = {}, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null) continue;
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else if (k === 'dataset') Object.assign(e.dataset, v);
      else e.setAttribute(k, v);
    }
    for (const c of children) {
      if (c !== undefined && c !== null) e.append(c);
    }
    return e;
  }

  function headers() {
    return token ? { Authorization: 'Bearer ' + token } : {};
  }

  // The connection: "connecting" until the first answer, "live" while the
  // node answers, "lost" from the first request that got no answer at all
  // (a refused or dropped connection; an HTTP error is an answer) until
  // the next answer. Times are the browser's clock.
  const conn = { state: 'connecting', lastAnswer: null, since: null, why: '' };

  // request fetches a node path and tracks the connection. A request that
  // gets no answer throws an Error with network set (the banner at the top
  // says so; panels keep their last content, greyed out).
  async function request(path, opts = {}) {
    let r;
    try {
      r = await fetch(path, { cache: 'no-store', ...opts });
    } catch (err) {
      if (opts.signal && opts.signal.aborted) throw err;
      connectionLost(err);
      const e = new Error('no answer from the node (' + err.message + ')');
      e.network = true;
      throw e;
    }
    connectionAnswered();
    return r;
  }

  function connectionAnswered() {
    conn.lastAnswer = new Date();
    if (conn.state === 'live') return;
    const wasLost = conn.state === 'lost';
    conn.state = 'live';
    renderConnection();
    if (wasLost) scheduleRefresh(); // everything shown is old: read it again
  }

  function connectionLost(err) {
    conn.why = err && err.message ? err.message : String(err);
    if (conn.state === 'lost') return;
    conn.state = 'lost';
    conn.since = new Date();
    renderConnection();
    // Retry soon, not in refreshSeconds: the banner goes when the node
    // answers again. A refresh under way sets its own next one, as soon.
    if (!refreshing) {
      clearTimeout(refreshTimer);
      refreshTimer = setTimeout(refresh, reconnectMillis);
    }
  }

  function renderConnection() {
    document.body.dataset.connection = conn.state;
    const banner = $('#offline');
    banner.hidden = conn.state !== 'lost';
    if (conn.state !== 'lost') return;
    banner.dataset.lastAnswer = conn.lastAnswer ? conn.lastAnswer.toISOString() : '';
    $('#offline-text').textContent = 'No answer from ' + location.origin + ' since ' + fmtTime(conn.since.toISOString()) +
      (conn.lastAnswer ? '; its last answer came at ' + fmtTime(conn.lastAnswer.toISOString()) : '; it has not answered since the page loaded') +
      ' (your browser\'s clock, UTC). Everything below is as of that answer and no longer live (greyed out). ' +
      'Retrying every ' + reconnectMillis / 1000 + ' s; is the node still running? (' + conn.why + ')';
    const pill = $('#ledger-state');
    pill.dataset.ready = 'unknown';
    pill.textContent = 'ledger: no answer';
  }

  // get fetches a node path with the token; a non-2xx answer throws an
  // Error carrying the API's code and message.
  async function get(path, kind = 'json') {
    const r = await request(path, { headers: headers() });
    if (!r.ok) {
      let body = {};
      try { body = await r.json(); } catch (_) { /* not JSON */ }
      // The API's error body is {"error": {code, message, …}}.
      const e = body.error || body;
      const err = new Error(e.message || r.status + ' ' + r.statusText);
      err.status = r.status;
      err.code = e.code || '';
      throw err;
    }
    return kind === 'json' ? r.json() : r.text();
  }

  function showAuthError(err) {
    const p = $('#auth-error');
    if (err && (err.status === 401 || err.status === 403)) {
      p.textContent = err.status === 401
        ? 'This node requires a bearer token: type a reader token above.'
        : 'This token may not read: ' + err.message;
      p.hidden = false;
    } else {
      p.hidden = true;
    }
  }

  // setPanelError shows what a panel's answer said. A request that got
  // no answer is not shown here: the banner at the top says it once, and
  // the panel keeps its last content, greyed out.
  function setPanelError(section, err) {
    const p = $('#' + section + ' .panel-error');
    if (!p) return;
    if (err && err.network) return;
    p.hidden = !err;
    p.textContent = err ? (err.code ? err.code + ': ' : '') + err.message : '';
  }

  function fmtTime(s) {
    if (!s) return '';
    const d = new Date(s);
    return isNaN(d) ? String(s) : d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
  }

  function fmtAge(seconds) {
    if (seconds === null || seconds === undefined || isNaN(seconds)) return 'unknown';
    if (seconds < 90) return seconds.toFixed(1) + ' s';
    if (seconds < 5400) return (seconds / 60).toFixed(1) + ' min';
    return (seconds / 3600).toFixed(1) + ' h';
  }

  function short(hash) {
    return hash ? String(hash).slice(0, 12) + '…' : '';
  }

  // stateClass returns the classes of a state's chip or cell: its colour
  // (st-NAME) and its group's icon (g-GROUP).
  function stateClass(state, ready) {
    const info = stateInfo[state];
    if (info) return 'st st-' + state + ' g-' + info[0];
    return 'st st-other g-' + (ready ? 'ready' : 'probe');
  }

  // paintUnknown gives a state the table does not know a colour derived
  // from its name: dark enough for white text whatever the hue.
  function paintUnknown(e, state) {
    if (stateInfo[state]) return;
    let h = 0;
    for (const ch of String(state)) h = (h * 31 + ch.charCodeAt(0)) % 360;
    e.style.setProperty('--c', 'hsl(' + h + ', 45%, 26%)');
  }

  function stateMeaning(state) {
    return stateInfo[state] ? stateInfo[state][1] : 'a state this page does not know';
  }

  function stateChip(state) {
    const c = el('span', { class: 'chip ' + stateClass(state, false), text: state, title: state + ': ' + stateMeaning(state), dataset: { state } });
    paintUnknown(c, state);
    return c;
  }

  function proofText(p) {
    if (!p) return 'proof: none (the state rests on an absence)';
    return 'proof: ' + p.type + ' ' + p.stream + '@' + p.version + ' (position ' + p.position + ', id ' + p.id + ')';
  }

  function projectionPath(name) {
    // min_position: a read model that includes every event the page saw.
    return '/v1/projections/' + name + (lastPosition > 0 ? '?min_position=' + lastPosition : '');
  }

  // ---- node, readiness, verification ----

  // clockNote compares the command clock (a timed read model's "at")
  // with the wall clock that stamped the newest event: on a production
  // node they agree; on a demo or test clock they can be months apart,
  // and the page says so rather than mixing the two silently.
  function clockNote(at) {
    const rec = lastInfo && lastInfo.head && lastInfo.head.recorded_at;
    if (!at || !rec) return '';
    const gap = Date.parse(at) - Date.parse(rec);
    if (isNaN(gap) || Math.abs(gap) < clockGapMillis) return '';
    return 'This node\'s command clock (' + fmtTime(at) + ') is not the wall clock that stored the newest event (' + fmtTime(rec) +
      '): it runs on a demo or test clock, so recorded times and judged times differ.';
  }

  async function loadInfo() {
    const info = await get('/v1/info');
    lastInfo = info;
    $('#node').textContent = 'node ' + info.node_id + ' · ledger ' + info.ledger_id + ' · ' + info.head.size + ' events · v' + info.version;
    lastPosition = Math.max(lastPosition, info.head.size);
    return info;
  }

  // loadReady reads the ledger's state: /readyz (public) answers 503 with
  // its reasons when the node does not serve or its read models lag. It
  // says nothing about providers: the matrix summary beside it does.
  async function loadReady() {
    const r = await request('/readyz');
    const body = await r.json();
    const pill = $('#ledger-state');
    pill.dataset.ready = String(body.ready);
    pill.textContent = body.ready ? 'ledger: serving, read models caught up' : 'ledger: not ready';
    pill.title = 'GET /readyz (the ledger, not the providers): ' + (body.ready
      ? 'the node serves and every read model is within ' + body.max_projection_lag + ' events of the head (' + body.head + ')'
      : (body.reasons || []).map((x) => x.code + ': ' + x.message).join('\n'));
  }

  // parseCheckpoint reads a C2SP signed note: origin, size, root, then a
  // blank line and one "— name signature" line per signature.
  function parseCheckpoint(note) {
    const [body, sigs = ''] = note.split('\n\n');
    const lines = body.split('\n');
    return {
      text: body + '\n',
      origin: lines[0], size: Number(lines[1]), root: lines[2],
      signatures: sigs.split('\n').filter((l) => l.startsWith('— ')).map((l) => {
        const [name, sig] = l.slice(2).split(' ');
        return { name, sig };
      }),
    };
  }

  function b64bytes(s) {
    return Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
  }

  function hex(bytes) {
    return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
  }

  // checkSignature verifies one Ed25519 note signature against the node's
  // published verifier keys ("name+hash+base64(0x01 || key)") with
  // WebCrypto; it says "unchecked" where the browser has no Ed25519.
  async function checkSignature(cp, s, verifierKeys) {
    const raw = b64bytes(s.sig);
    const keyHash = hex(raw.slice(0, 4));
    // The key's base64 may itself hold '+': split at the first two only.
    const parse = (k) => {
      const i = k.indexOf('+'), j = k.indexOf('+', i + 1);
      return { name: k.slice(0, i), hash: k.slice(i + 1, j), key: k.slice(j + 1) };
    };
    const vk = verifierKeys.map(parse).find((k) => k.name === s.name && k.hash === keyHash);
    if (!vk) return { keyHash, result: 'key not published by this node' };
    try {
      const key = b64bytes(vk.key);
      if (key[0] !== 1) return { keyHash, result: 'unchecked (not an Ed25519 key)' };
      const k = await crypto.subtle.importKey('raw', key.slice(1), { name: 'Ed25519' }, false, ['verify']);
      const ok = await crypto.subtle.verify({ name: 'Ed25519' }, k, raw.slice(4), new TextEncoder().encode(cp.text));
      return { keyHash, result: ok ? 'valid' : 'INVALID' };
    } catch (_) {
      return { keyHash, result: 'unchecked (no Ed25519 in this browser)' };
    }
  }

  // checkpointAge reads greffe_checkpoint_age_seconds from the node's
  // metrics (readers may read them); null when they are not available.
  async function checkpointAge() {
    try {
      const text = await get('/metrics', 'text');
      const m = text.match(/^greffe_checkpoint_age_seconds (\S+)$/m);
      return m ? Number(m[1]) : null;
    } catch (_) {
      return null;
    }
  }

  async function loadVerification(info) {
    const note = await get('/v1/checkpoint', 'text');
    const cp = parseCheckpoint(note);
    const age = await checkpointAge();
    const dl = $('#checkpoint');
    dl.replaceChildren();
    const fact = (k, v, id) => {
      dl.append(el('dt', { text: k }), el('dd', { text: v, id }));
    };
    fact('origin', cp.origin);
    fact('checkpoint size', cp.size + ' events', 'checkpoint-size');
    fact('head', info.head.size + ' events' + (cp.size === info.head.size ? ' (covered by the checkpoint)'
      : ' (' + (info.head.size - cp.size) + ' newer than the checkpoint)'));
    fact('root', cp.root);
    fact('checkpoint age', age === null ? 'unknown (metrics not readable)' : fmtAge(age), 'checkpoint-age');
    fact('last event', fmtTime(info.head.recorded_at));
    for (const s of cp.signatures) {
      const c = await checkSignature(cp, s, info.verifier_keys || []);
      fact('signature', s.name + ' key ' + c.keyHash + ': ' + c.result);
    }
    dl.dataset.size = String(cp.size);

    const st = await get('/v1/projections');
    const tb = $('#projections-status tbody');
    tb.replaceChildren(...st.projections.map((p) => el('tr', { dataset: { projection: p.name } },
      el('td', { text: p.name, title: p.description }),
      el('td', { text: String(p.position) }),
      el('td', { text: String(p.lag) }),
      el('td', { text: p.error ? 'failed: ' + p.error : 'ok', class: p.error ? 'error' : '' }))));
  }

  // ---- cluster ----

  // loadCluster shows the members as this node sees them. A single node
  // answers not_clustered: the panel says it is single (it takes every
  // write itself; it has no raft term or index).
  async function loadCluster(info) {
    const facts = $('#cluster-facts');
    const tb = $('#cluster-members tbody');
    const fact = (k, v, id) => facts.append(el('dt', { text: k }), el('dd', { text: v, id }));
    let st;
    try {
      st = await get('/v1/cluster/status');
    } catch (err) {
      if (err.code !== 'not_clustered') throw err;
      $('#cluster').dataset.mode = 'single';
      facts.replaceChildren();
      fact('mode', 'single node: not clustered (no raft; serve with --raft-addr and --bootstrap or --join to form a cluster)', 'cluster-mode');
      fact('members', '1: this node');
      fact('leader', info.node_id + ' (a single node takes every write itself)', 'cluster-leader');
      fact('term', '— (no raft)');
      fact('applied index', '— (no raft log); head ' + info.head.size + ' events');
      tb.replaceChildren(el('tr', { class: 'self', dataset: { member: info.node_id, reachable: 'true' } },
        el('td', { text: info.node_id }), el('td', { text: 'single' }), el('td', { text: 'serving' }), el('td', { text: '—' }),
        el('td', { text: '—' }), el('td', { text: '0' }), el('td', { text: String(info.head.size) }), el('td', { text: location.origin })));
      return;
    }
    $('#cluster').dataset.mode = 'cluster';
    const servers = st.servers || [];
    const leader = servers.find((m) => m.leader);
    facts.replaceChildren();
    fact('mode', 'cluster of ' + servers.length + ' (' + servers.filter((m) => m.suffrage === 'voter').length + ' voters)', 'cluster-mode');
    fact('this node', st.node_id + ' (' + st.state + ')');
    fact('leader', leader ? leader.id + ' at ' + (leader.http_url || leader.raft_addr) : 'none known: no leader elected (is a quorum up?)', 'cluster-leader');
    fact('term', String(st.term), 'cluster-term');
    fact('commit index', String(st.commit_index));
    fact('applied index', String(st.applied_index), 'cluster-applied');
    fact('snapshot index', String(st.snapshot_index));
    // Lag: how many raft entries a member has applied fewer than the
    // leader; unknown when either did not answer.
    const base = leader && leader.reachable ? leader.applied_index : null;
    tb.replaceChildren(...servers.map((m) => {
      const lag = base !== null && m.reachable ? Math.max(0, base - m.applied_index) : null;
      const role = (m.leader ? 'leader, ' : '') + m.suffrage;
      return el('tr', { class: m.id === st.node_id ? 'self' : '', dataset: { member: m.id, reachable: String(m.reachable), leader: String(m.leader) } },
        el('td', { text: m.id }),
        el('td', { text: role }),
        el('td', { text: m.reachable ? m.state : 'unreachable', title: m.error || '' }),
        el('td', { text: m.reachable ? String(m.term) : '' }),
        el('td', { text: m.reachable ? String(m.applied_index) : '' }),
        el('td', { text: lag === null ? 'unknown' : lag + (lag === 1 ? ' entry' : ' entries'), dataset: { lag: lag === null ? '' : String(lag) } }),
        el('td', { text: m.reachable ? String(m.head_size) : '' }),
        el('td', { text: m.http_url || m.raft_addr, title: 'raft ' + m.raft_addr }));
    }));
  }

  // ---- readiness matrix ----

  // renderLegend shows the states present in the matrix, and under
  // "every state" each state the page knows, by group, with its meaning.
  function renderLegend(states) {
    $('#legend').replaceChildren(...[...states].sort().map(stateChip));
    const box = $('#legend-all .legend-groups');
    if (box.childElementCount > 0) return;
    for (const [g, name] of Object.entries(groupNames)) {
      const dl = el('dl');
      for (const [st, [group, meaning]] of Object.entries(stateInfo)) {
        if (group === g) dl.append(el('dt', {}, stateChip(st)), el('dd', { text: meaning }));
      }
      box.append(el('h4', { text: name }), dl);
    }
  }

  // scheduleText describes a row's probe schedule; null when it has none.
  function scheduleText(s) {
    if (!s) return null;
    if (!s.active) return 'schedule ended' + (s.end_reason ? ' (' + s.end_reason + ')' : '');
    return 'every ' + s.interval + ' on ' + s.host + ' (' + s.kind + ' probe)';
  }

  // scheduleCell shows whether something keeps the row's live_proven
  // fresh: a standing probe schedule (when it is next due, or since when
  // it is missed), or none (the row's probes are history: only those
  // writers recorded).
  function scheduleCell(row) {
    const s = row.schedule;
    const historyNote = 'history: no standing probe schedule; this row shows only the probes writers recorded, and nothing keeps it fresh';
    if (!s || !s.active) {
      const td = el('td', { class: 'probes', dataset: { schedule: s ? 'ended' : 'none' } },
        el('span', { class: 'chip history', text: 'history', title: historyNote }));
      if (s) td.append(el('div', { class: 'muted', text: scheduleText(s) }));
      return td;
    }
    const when = (t) => fmtTime(t);
    const title = scheduleText(s) + '\nlast probe ' + (s.last_ran_at ? when(s.last_ran_at) : 'not yet') + ', next due ' + when(s.next_due) +
      (s.missed_since ? '\nmissed since ' + when(s.missed_since) : '') + '\n(times: the node\'s command clock)';
    const td = el('td', { class: 'probes', title, dataset: { schedule: s.missed_since ? 'missed' : 'active' } }, 'every ' + s.interval + ' on ' + s.host);
    td.append(s.missed_since
      ? el('div', { class: 'warn-text', text: 'missed since ' + when(s.missed_since) })
      : el('div', { class: 'muted', text: 'next due ' + when(s.next_due).slice(11) }));
    return td;
  }

  function showDetail(row, column, label, fact, td) {
    for (const c of document.querySelectorAll('#matrix td.selected')) c.classList.remove('selected');
    td.classList.add('selected');
    selected = { provider: row.provider, column };
    const d = $('#detail');
    d.style.setProperty('--c', getComputedStyle(td).backgroundColor);
    d.dataset.provider = row.provider;
    d.dataset.col = column;
    $('#detail-title').textContent = row.provider + ' · ' + label + ': ' + fact.state;
    const dl = $('#detail-facts');
    dl.replaceChildren();
    const add = (k, v) => dl.append(el('dt', { text: k }), el('dd', { text: v }));
    add('ready', fact.ready ? 'yes' : 'no');
    add('state', fact.state + ': ' + stateMeaning(fact.state));
    add('reason', fact.reason);
    const p = fact.proof;
    if (p) {
      add('proving event', p.type + ' in ' + p.stream + '@' + p.version);
      add('position', String(p.position));
      add('event id', p.id);
    } else {
      add('proving event', 'none: the state rests on an absence');
    }
    add('probes', scheduleText(row.schedule) || 'history: no standing probe schedule');
    add('judged at', fmtTime(row.at) + ' (the node\'s command clock)');
    const btn = $('#detail-load');
    btn.hidden = !p;
    btn.dataset.id = p ? p.id : '';
    $('#detail-event').hidden = true;
    if (!d.open) d.show(); // not modal: the matrix stays usable beside it
    $('#detail-close').focus({ preventScroll: true });
  }

  function closeDetail() {
    const d = $('#detail');
    if (d.open) d.close();
    selected = null;
    for (const c of document.querySelectorAll('#matrix td.selected')) c.classList.remove('selected');
  }

  async function loadProvingEvent() {
    const id = $('#detail-load').dataset.id;
    const pre = $('#detail-event');
    try {
      const e = await get('/v1/events/' + encodeURIComponent(id));
      pre.textContent = JSON.stringify(e, null, 2);
    } catch (err) {
      pre.textContent = 'could not load the event: ' + err.message;
    }
    pre.hidden = false;
  }

  // renderSummary counts the matrix's rows: how many providers are
  // activation-ready, live-proven, eligible, kept fresh by a schedule.
  function renderSummary(rows) {
    const count = (f) => rows.filter(f).length;
    const n = rows.length;
    const act = count((r) => r.activation_ready && r.activation_ready.ready);
    const live = count((r) => r.live_proven && r.live_proven.ready);
    const elig = count((r) => r.eligible_for_attempt && r.eligible_for_attempt.ready);
    const sched = count((r) => r.schedule && r.schedule.active);
    const pill = $('#matrix-summary');
    Object.assign(pill.dataset, { total: String(n), ready: String(act), live: String(live), eligible: String(elig), scheduled: String(sched) });
    pill.dataset.level = n === 0 || act === 0 ? 'none' : act === n ? 'all' : 'some';
    pill.textContent = n === 0 ? 'no provider declared' : act + ' of ' + n + ' providers activation-ready';
    pill.title = 'From the readiness matrix: ' + act + ' activation-ready, ' + live + ' live-proven, ' + elig + ' eligible for an attempt, of ' + n +
      ' providers; ' + sched + ' kept fresh by a probe schedule, ' + (n - sched) + ' history.';
  }

  async function loadMatrix() {
    const doc = await get(projectionPath('readiness'));
    $('#readiness-at').textContent = 'judged at ' + fmtTime(doc.at) + ' (the node\'s command clock), as of position ' + doc.position;
    $('#readiness-clock-note').textContent = clockNote(doc.at);
    $('#readiness').dataset.at = doc.at || '';
    const states = new Set();
    const rows = (doc.rows || []).slice().sort((a, b) => a.provider.localeCompare(b.provider));
    renderSummary(rows);
    const tb = $('#matrix tbody');
    tb.replaceChildren(...rows.map((row) => {
      const cls = [row.dormant ? 'dormant' : '', row.schedule && row.schedule.active ? 'scheduled' : 'history'].join(' ').trim();
      const tr = el('tr', { class: cls, dataset: { provider: row.provider } },
        el('td', { text: row.provider, title: (row.model_tag || '') + (row.endpoint ? ' at ' + row.endpoint : '') }),
        el('td', { text: row.kind || '' }),
        scheduleCell(row));
      for (const [key, label] of matrixColumns) {
        const f = row[key] || { ready: false, state: 'unknown', reason: 'absent from the read model' };
        states.add(f.state);
        const td = el('td', {
          class: 'cell ' + stateClass(f.state, f.ready) + ' ' + (f.ready ? 'ready' : 'not-ready'),
          title: f.state + ': ' + f.reason + '\n' + proofText(f.proof),
          text: f.state,
          tabindex: '0',
          dataset: { col: key, state: f.state, ready: String(f.ready), reason: f.reason, proof: f.proof ? f.proof.id : '' },
        });
        paintUnknown(td, f.state);
        td.addEventListener('click', () => showDetail(row, key, label, f, td));
        td.addEventListener('keydown', (ev) => {
          if (ev.key === 'Enter' || ev.key === ' ') {
            ev.preventDefault();
            showDetail(row, key, label, f, td);
          }
        });
        if (selected && selected.provider === row.provider && selected.column === key) td.classList.add('selected');
        tr.append(td);
      }
      return tr;
    }));
    if (rows.length === 0) {
      tb.append(el('tr', {}, el('td', { colspan: '7', class: 'muted', text: 'no provider declared: nothing is ready (an empty inventory is not "all ready")' })));
    }
    renderLegend(states);
  }

  // ---- missions and approvals ----

  function budgetText(b) {
    if (!b) return '';
    const part = (name, x) => (x ? name + ' ' + x.used + '/' + x.limit : null);
    return [part('inference', b.inference_requests), part('attempts', b.attempts),
      part('corrections', b.corrections), part('recovery', b.error_recovery_cycles)].filter(Boolean).join(' · ');
  }

  function checksCell(m) {
    const cands = m.candidates || [];
    const td = el('td', { class: 'checks' });
    if (cands.length === 0) {
      td.append(el('span', { class: 'muted', text: 'no candidate' }));
      return td;
    }
    const c = cands[cands.length - 1];
    for (const [k, v] of Object.entries(c.checks || {})) {
      if (v > 0) td.append(el('span', { class: k, text: k + ' ' + v }));
    }
    td.append(el('span', { class: 'muted', text: c.verified ? '(verified)' : '(not verified)', title: 'candidate ' + c.hash }));
    return td;
  }

  async function loadMissions() {
    const doc = await get(projectionPath('missions'));
    $('#missions-clock').textContent = 'No times: each mission\'s state as of log position ' + doc.position + '.';
    const tb = $('#missions-board tbody');
    tb.replaceChildren(...(doc.rows || []).map((m) => {
      const route = m.route ? m.route.selected + (m.route.fallback ? ' (fallback)' : '') : 'not routed';
      const attempt = m.attempt ? '#' + m.attempt.n + (m.attempt.ended ? ' ended' + (m.attempt.end_reason ? ': ' + m.attempt.end_reason : '') : '') : '';
      const review = m.review ? m.review.verdict + ' by ' + m.review.reviewer : '';
      let end = '';
      if (m.delivery) end = 'delivered to ' + m.delivery.to;
      if (m.integration) end += (end ? ' · ' : '') + 'integrated';
      if (m.stop) end += (end ? ' · ' : '') + 'stopped: ' + m.stop.reason;
      if (m.uncertain && m.uncertain.length) end += (end ? ' · ' : '') + m.uncertain.length + ' uncertain';
      return el('tr', { dataset: { mission: m.mission_id, state: m.state } },
        el('td', { text: m.mission_id, title: m.task_class + ', ' + m.mode + (m.confidential ? ', confidential' : '') }),
        el('td', { class: 'state', text: m.state }),
        el('td', { text: route }),
        el('td', { text: attempt }),
        el('td', { text: budgetText(m.budgets) }),
        checksCell(m),
        el('td', { text: review }),
        el('td', { text: end, title: m.stop ? m.stop.detail : '' }));
    }));
  }

  async function loadApprovals() {
    const doc = await get(projectionPath('approvals'));
    $('#approvals-clock').textContent = 'Expires: each approval\'s own expiry; the status (expired or not) is judged at ' + fmtTime(doc.at) +
      ' (the node\'s command clock), as of position ' + doc.position + '.';
    const tb = $('#approvals-table tbody');
    tb.replaceChildren(...(doc.rows || []).map((a) => el('tr', { dataset: { approval: a.approval_id, status: a.status } },
      el('td', { text: a.approval_id }),
      el('td', { text: a.action }),
      el('td', { text: a.subject }),
      el('td', { class: 'state', text: a.status }),
      el('td', { text: a.used + ' of ' + a.uses + ' used, ' + a.remaining + ' left' }),
      el('td', { text: fmtTime(a.expires_at) }),
      el('td', { text: a.approver }))));
  }

  // ---- measurements: inline SVG charts ----

  const svgNS = 'http://www.w3.org/2000/svg';
  function svg(tag, attrs = {}, ...children) {
    const e = document.createElementNS(svgNS, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    for (const c of children) e.append(c);
    return e;
  }

  // timeTicks returns the ticks of a time axis from t0 to t1 (ms): the
  // smallest round step that gives at most max ticks, and the label
  // format that step needs.
  const tickSteps = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800, 2592000]
    .map((x) => x * 1000);
  function timeTicks(t0, t1, max) {
    if (t1 <= t0) return { ticks: [t0], label: (t) => fmtTime(new Date(t).toISOString()).slice(5, 19) };
    const step = tickSteps.find((st) => (t1 - t0) / st <= max) || tickSteps[tickSteps.length - 1];
    const ticks = [];
    for (let t = Math.ceil(t0 / step) * step; t <= t1; t += step) ticks.push(t);
    const iso = (t) => fmtTime(new Date(t).toISOString());
    let label;
    if (step < 60000) label = (t) => iso(t).slice(11, 19); // HH:MM:SS
    else if (step < 86400000) label = (t) => iso(t).slice(11, 16); // HH:MM
    else label = (t) => iso(t).slice(5, 10); // MM-DD
    return { ticks, label };
  }

  // chart draws one value over time, one line per series:
  // series = [{name, colour, points: [{t: ms, v: number, label}]}]. The x
  // axis is time (UTC): round ticks, and under them the span it covers.
  function chart(title, unit, series) {
    const W = 360, H = 176, L = 48, R = 14, T = 12, B = 40;
    const pts = series.flatMap((s) => s.points);
    const fig = el('figure', { dataset: { chart: title } });
    fig.append(el('figcaption', { text: title + (unit ? ' (' + unit + ')' : '') }));
    if (pts.length === 0) {
      fig.append(el('p', { class: 'muted', text: 'no value recorded' }));
      return fig;
    }
    let t0 = Math.min(...pts.map((p) => p.t)), t1 = Math.max(...pts.map((p) => p.t));
    if (t1 === t0) {
      // One instant: a minute around it, so that the axis has a scale.
      t0 -= 30000;
      t1 += 30000;
    }
    const vmax = Math.max(...pts.map((p) => p.v)) * 1.1 || 1;
    const x = (t) => L + ((t - t0) / (t1 - t0)) * (W - L - R);
    const y = (v) => T + (1 - v / vmax) * (H - T - B);
    const s = svg('svg', { width: W, height: H, viewBox: '0 0 ' + W + ' ' + H, role: 'img', 'aria-label': title + ' over time (UTC)' });
    s.append(svg('line', { class: 'axis', x1: L, y1: T, x2: L, y2: H - B }),
      svg('line', { class: 'axis', x1: L, y1: H - B, x2: W - R, y2: H - B }));
    const label = (txt, ax, ay, anchor, cls) => {
      const t = svg('text', { x: ax, y: ay, 'text-anchor': anchor, class: cls || '' });
      t.textContent = txt;
      return t;
    };
    const fmtV = (v) => (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2));
    s.append(label(fmtV(vmax), L - 4, T + 8, 'end'), label(fmtV(vmax / 2), L - 4, y(vmax / 2) + 3, 'end'), label('0', L - 4, H - B, 'end'));
    const { ticks, label: tickLabel } = timeTicks(t0, t1, 4);
    for (const t of ticks) {
      const tx = x(t);
      s.append(svg('line', { class: 'grid', x1: tx, y1: T, x2: tx, y2: H - B }),
        svg('line', { class: 'axis', x1: tx, y1: H - B, x2: tx, y2: H - B + 4 }),
        label(tickLabel(t), tx, H - B + 14, 'middle', 'tick-x'));
    }
    const from = fmtTime(new Date(t0).toISOString()), to = fmtTime(new Date(t1).toISOString());
    const span = from + ' to ' + (from.slice(0, 10) === to.slice(0, 10) ? to.slice(11) : to);
    s.append(label('time (UTC, ended_at): ' + span, (L + W - R) / 2, H - 6, 'middle', 'axis-title'));
    for (const se of series) {
      const ps = se.points.slice().sort((a, b) => a.t - b.t);
      if (ps.length > 1) {
        s.append(svg('polyline', { stroke: se.colour, points: ps.map((p) => x(p.t).toFixed(1) + ',' + y(p.v).toFixed(1)).join(' ') }));
      }
      for (const p of ps) {
        const c = svg('circle', { cx: x(p.t).toFixed(1), cy: y(p.v).toFixed(1), r: 3, fill: se.colour });
        const tip = svg('title');
        tip.textContent = se.name + ': ' + fmtV(p.v) + (unit ? ' ' + unit : '') + ' at ' + fmtTime(new Date(p.t).toISOString()) + (p.label ? ' (' + p.label + ')' : '');
        c.append(tip);
        s.append(c);
      }
    }
    fig.append(s);
    if (series.length > 1 || series[0].name) {
      const legend = el('div', { class: 'legend' });
      for (const se of series) {
        const note = seriesNotes[se.name];
        const span = el('span', { class: 'chip series', text: note || se.name, dataset: { series: se.name },
          title: note || 'the model resident on the GPU during the measurement: ' + se.name });
        span.style.setProperty('--c', se.colour);
        legend.append(span);
      }
      fig.append(legend);
    }
    return fig;
  }

  async function loadMeasurements() {
    const doc = await get(projectionPath('measurements'));
    const gib = 1024 * 1024 * 1024;
    const box = $('#charts');
    const hosts = (doc.rows || []).slice().sort((a, b) => a.host.localeCompare(b.host));
    box.replaceChildren(...hosts.map((h) => {
      const series = (h.series || []).map((s, i) => ({ name: s.model, colour: seriesColours[i % seriesColours.length], points: s.points || [] }));
      const pick = (f) => series.map((s) => ({
        name: s.name, colour: s.colour,
        points: s.points.map((p) => ({ t: Date.parse(p.ended_at || p.started_at), v: f(p), label: p.measurement_id }))
          .filter((p) => typeof p.v === 'number' && !isNaN(p.v) && !isNaN(p.t)),
      }));
      const req = h.requests || {};
      return el('div', { class: 'host', dataset: { host: h.host } },
        el('h3', { text: h.host }),
        el('p', { class: 'muted', text: (req.recorded || 0) + ' recorded, ' + (req.uncertain || 0) + ' uncertain, ' + (req.requested || 0) + ' waiting' }),
        el('div', { class: 'row' },
          chart('tokens/s', '', pick((p) => (p.metrics ? p.metrics.tokens_per_second : undefined))),
          chart('VRAM used', 'GiB', pick((p) => (p.vram_used_bytes === undefined ? undefined : p.vram_used_bytes / gib))),
          chart('RAM available', 'GiB', pick((p) => (p.ram_available_bytes === undefined ? undefined : p.ram_available_bytes / gib)))));
    }));
    if (hosts.length === 0) box.append(el('p', { class: 'muted', text: 'no measurement recorded' }));
  }

  // ---- refresh ----

  async function refresh() {
    clearTimeout(refreshTimer);
    if (refreshing) {
      again = true;
      return;
    }
    refreshing = true;
    let info = null;
    let infoErr = null;
    try {
      info = await loadInfo();
      showAuthError(null);
    } catch (err) {
      infoErr = err;
      if (!err.network) showAuthError(err);
    }
    const needInfo = (load) => () => (info ? load(info) : Promise.reject(infoErr || new Error('node info unavailable')));
    const panels = [
      ['verification', needInfo(loadVerification)],
      ['cluster', needInfo(loadCluster)],
      ['readiness', loadMatrix],
      ['missions', loadMissions],
      ['approvals', loadApprovals],
      ['measurements', loadMeasurements],
    ];
    await Promise.all([
      loadReady().catch(() => {}),
      ...panels.map(([name, load]) => load().then(() => setPanelError(name, null), (err) => setPanelError(name, err))),
    ]);
    document.body.dataset.loaded = 'true';
    document.body.dataset.refreshes = String((Number(document.body.dataset.refreshes) || 0) + 1);
    refreshing = false;
    // While the node does not answer, retry every reconnectMillis, so
    // that the page is live again soon after it is back.
    clearTimeout(refreshTimer);
    refreshTimer = setTimeout(refresh, conn.state === 'lost' ? reconnectMillis : refreshSeconds * 1000);
    if (again) {
      again = false;
      scheduleRefresh();
    }
  }

  function scheduleRefresh() {
    if (debounce) return;
    debounce = setTimeout(() => {
      debounce = null;
      refresh();
    }, debounceMillis);
  }

  // ---- live tail over SSE ----

  function setTail(state, detail) {
    $('#tail').dataset.state = state;
    const s = $('#tail-status');
    s.textContent = state;
    s.title = detail || '';
  }

  function addEvent(e, live) {
    tailQueue.push({ e, live });
    if (tailQueue.length > tailMax) tailQueue = tailQueue.slice(-tailMax);
    if (!tailTimer) tailTimer = setTimeout(flushTail, tailFlushMillis);
  }

  function flushTail() {
    tailTimer = null;
    const tb = $('#tail-events tbody');
    const rows = tailQueue.map(({ e, live }) => el('tr', { class: live ? 'new' : '', dataset: { id: e.id, position: String(e.position), type: e.type } },
      el('td', { text: String(e.position) }),
      el('td', { text: fmtTime(e.recorded_at) }),
      el('td', { text: e.stream + '@' + e.version }),
      el('td', { text: e.type, title: JSON.stringify(e.data) }),
      el('td', { text: e.actor || '' })));
    tailQueue = [];
    tb.prepend(...rows.reverse());
    while (tb.rows.length > tailMax) tb.deleteRow(tb.rows.length - 1);
  }

  // follow reads the SSE stream with fetch, not EventSource, because
  // EventSource cannot send the Authorization header. It resumes after the
  // last position it showed.
  async function follow(signal) {
    let from = null;
    let caughtUp = 0;
    while (!signal.aborted) {
      try {
        if (from === null) {
          const info = await get('/v1/info');
          from = Math.max(0, info.head.size - tailBacklog);
          caughtUp = info.head.size;
        }
        const r = await request('/v1/subscribe?from=' + from, { headers: headers(), signal });
        if (!r.ok) {
          const err = new Error('subscribe: ' + r.status + ' ' + r.statusText);
          err.status = r.status;
          throw err;
        }
        setTail('live');
        const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          connectionAnswered(); // an event or a heartbeat: the node answers
          buf += value.replace(/\r\n/g, '\n');
          let i;
          while ((i = buf.indexOf('\n\n')) >= 0) {
            const block = buf.slice(0, i);
            buf = buf.slice(i + 2);
            const data = block.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trimStart()).join('\n');
            if (!data) continue; // a comment or heartbeat
            if (/^event: error$/m.test(block)) throw new Error('subscription ended: ' + data);
            const e = JSON.parse(data);
            from = e.position + 1;
            const live = e.position >= caughtUp;
            addEvent(e, live);
            if (live) {
              lastPosition = Math.max(lastPosition, from);
              scheduleRefresh();
            }
          }
        }
        throw new Error('the node closed the subscription');
      } catch (err) {
        if (signal.aborted) return;
        if (err.status === 401 || err.status === 403) {
          // Retrying cannot help: a new token restarts the tail.
          setTail('unauthorized', err.message);
          return;
        }
        setTail('reconnecting', err.message);
        // The stream broke: ask at once whether the node still answers
        // (the banner at the top says so when it does not).
        if (!err.network) await request('/healthz').catch(() => {});
        await new Promise((res) => setTimeout(res, reconnectMillis));
      }
    }
  }

  function restartTail() {
    if (tailAbort) tailAbort.abort();
    tailQueue = [];
    $('#tail-events tbody').replaceChildren();
    setTail('connecting');
    tailAbort = new AbortController();
    follow(tailAbort.signal);
  }

  // ---- start ----

  function useToken(t) {
    token = t;
    if (t) sessionStorage.setItem(TOKEN_KEY, t);
    else sessionStorage.removeItem(TOKEN_KEY);
    restartTail();
    refresh();
  }

  document.addEventListener('DOMContentLoaded', () => {
    $('#token').value = token;
    $('#token-form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      useToken($('#token').value.trim());
    });
    $('#token-clear').addEventListener('click', () => {
      $('#token').value = '';
      useToken('');
    });
    $('#detail-close').addEventListener('click', closeDetail);
    document.addEventListener('keydown', (ev) => {
      if (ev.key === 'Escape' && $('#detail').open) closeDetail();
    });
    $('#detail-load').addEventListener('click', loadProvingEvent);
    restartTail();
    refresh();
  });
})();
