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

  // One colour per readiness state. Ready states are greens, absences
  // greys, failures reds, staleness amber; a state this table does not
  // know gets a colour derived from its name, so it is still told apart.
  const stateColours = {
    configured: '#2e7d32', live_proven: '#1b5e20', activation_ready: '#00695c',
    direct_reply_only: '#558b2f', bound: '#33691e', no_binding_required: '#4e7d3a',
    not_probed: '#757575', not_activated: '#546e7a', provider_unknown: '#616161',
    provider_dormant: '#37474f', stale: '#b28704', failed: '#c62828',
    unreachable: '#ad1457', timeout: '#6a1b9a', tag_not_listed: '#e65100',
    alias_not_exact: '#d84315', limits_unknown: '#ef6c00', endpoint_missing: '#5d4037',
    model_tag_missing: '#6d4c41', not_configured: '#4e342e', not_live_proven: '#8e24aa',
    binding_missing: '#0277bd', binding_not_verified: '#01579b', binding_invalidated: '#283593',
  };
  const matrixColumns = [
    ['configuration_ready', 'configuration'],
    ['eligible_for_attempt', 'eligible'],
    ['live_proven', 'live'],
    ['activation_ready', 'activation'],
  ];
  const seriesColours = ['#1565c0', '#c62828', '#2e7d32', '#6a1b9a', '#ef6c00', '#00838f'];

  let token = sessionStorage.getItem(TOKEN_KEY) || '';
  let tailAbort = null;
  let lastPosition = 0; // the log size the page has seen events up to
  let refreshTimer = null;
  let debounce = null;
  let refreshing = false; // a refresh is running
  let again = false; // an event arrived during it: refresh once more
  let tailQueue = []; // events waiting to be drawn, oldest first, at most tailMax
  let tailTimer = null;
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

  // get fetches a node path with the token; a non-2xx answer throws an
  // Error carrying the API's code and message.
  async function get(path, kind = 'json') {
    const r = await fetch(path, { headers: headers(), cache: 'no-store' });
    if (!r.ok) {
      let body = {};
      try { body = await r.json(); } catch (_) { /* not JSON */ }
      const err = new Error(body.message || r.status + ' ' + r.statusText);
      err.status = r.status;
      err.code = body.code || '';
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

  function setPanelError(section, err) {
    const p = $('#' + section + ' .panel-error');
    if (!p) return;
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

  function colourOf(state) {
    if (stateColours[state]) return stateColours[state];
    let h = 0;
    for (const ch of String(state)) h = (h * 31 + ch.charCodeAt(0)) % 360;
    return 'hsl(' + h + ', 45%, 38%)';
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

  async function loadInfo() {
    const info = await get('/v1/info');
    $('#node').textContent = 'node ' + info.node_id + ' · ledger ' + info.ledger_id + ' · ' + info.head.size + ' events · v' + info.version;
    lastPosition = Math.max(lastPosition, info.head.size);
    return info;
  }

  async function loadReady() {
    // /readyz is public and answers 503 with its reasons when not ready.
    const r = await fetch('/readyz', { cache: 'no-store' });
    const body = await r.json();
    const pill = $('#ready');
    pill.dataset.ready = String(body.ready);
    pill.textContent = body.ready ? 'ready' : 'not ready';
    pill.title = body.ready ? 'projections within ' + body.max_projection_lag + ' events of the head'
      : (body.reasons || []).map((x) => x.code + ': ' + x.message).join('\n');
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

  // ---- readiness matrix ----

  function renderLegend(states) {
    $('#legend').replaceChildren(...[...states].sort().map((s) => {
      const span = el('span', { text: s });
      span.style.setProperty('--c', colourOf(s));
      return span;
    }));
  }

  function showDetail(row, column, label, fact, td) {
    for (const c of document.querySelectorAll('#matrix td.selected')) c.classList.remove('selected');
    td.classList.add('selected');
    selected = { provider: row.provider, column };
    const d = $('#detail');
    d.style.setProperty('--c', colourOf(fact.state));
    $('#detail-title').textContent = row.provider + ' · ' + label + ': ' + fact.state;
    const dl = $('#detail-facts');
    dl.replaceChildren();
    const add = (k, v) => dl.append(el('dt', { text: k }), el('dd', { text: v }));
    add('ready', fact.ready ? 'yes' : 'no');
    add('state', fact.state);
    add('reason', fact.reason);
    const p = fact.proof;
    if (p) {
      add('proving event', p.type + ' in ' + p.stream + '@' + p.version);
      add('position', String(p.position));
      add('event id', p.id);
    } else {
      add('proving event', 'none: the state rests on an absence');
    }
    add('judged at', fmtTime(row.at));
    const btn = $('#detail-load');
    btn.hidden = !p;
    btn.dataset.id = p ? p.id : '';
    $('#detail-event').hidden = true;
    d.hidden = false;
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

  async function loadMatrix() {
    const doc = await get(projectionPath('readiness'));
    $('#readiness-at').textContent = 'judged at ' + fmtTime(doc.at) + ', as of position ' + doc.position;
    const states = new Set();
    const rows = (doc.rows || []).slice().sort((a, b) => a.provider.localeCompare(b.provider));
    const tb = $('#matrix tbody');
    tb.replaceChildren(...rows.map((row) => {
      const tr = el('tr', { class: row.dormant ? 'dormant' : '', dataset: { provider: row.provider } },
        el('td', { text: row.provider, title: (row.model_tag || '') + (row.endpoint ? ' at ' + row.endpoint : '') }),
        el('td', { text: row.kind || '' }));
      for (const [key, label] of matrixColumns) {
        const f = row[key] || { ready: false, state: 'unknown', reason: 'absent from the read model' };
        states.add(f.state);
        const td = el('td', {
          class: 'cell ' + (f.ready ? 'ready' : 'not-ready'),
          title: f.state + ': ' + f.reason + '\n' + proofText(f.proof),
          text: f.state,
          dataset: { col: key, state: f.state, ready: String(f.ready), reason: f.reason, proof: f.proof ? f.proof.id : '' },
        });
        td.style.setProperty('--c', colourOf(f.state));
        td.addEventListener('click', () => showDetail(row, key, label, f, td));
        if (selected && selected.provider === row.provider && selected.column === key) td.classList.add('selected');
        tr.append(td);
      }
      return tr;
    }));
    if (rows.length === 0) {
      tb.append(el('tr', {}, el('td', { colspan: '6', class: 'muted', text: 'no provider declared: nothing is ready (an empty inventory is not "all ready")' })));
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

  // chart draws one value over time, one line per series:
  // series = [{name, colour, points: [{t: ms, v: number, label}]}].
  function chart(title, unit, series) {
    const W = 340, H = 150, L = 48, R = 10, T = 12, B = 26;
    const pts = series.flatMap((s) => s.points);
    const fig = el('figure', { dataset: { chart: title } });
    fig.append(el('figcaption', { text: title + (unit ? ' (' + unit + ')' : '') }));
    if (pts.length === 0) {
      fig.append(el('p', { class: 'muted', text: 'no value recorded' }));
      return fig;
    }
    const t0 = Math.min(...pts.map((p) => p.t)), t1 = Math.max(...pts.map((p) => p.t));
    const vmax = Math.max(...pts.map((p) => p.v)) * 1.1 || 1;
    const x = (t) => (t1 === t0 ? L + (W - L - R) / 2 : L + ((t - t0) / (t1 - t0)) * (W - L - R));
    const y = (v) => T + (1 - v / vmax) * (H - T - B);
    const s = svg('svg', { width: W, height: H, viewBox: '0 0 ' + W + ' ' + H, role: 'img', 'aria-label': title });
    s.append(svg('line', { class: 'axis', x1: L, y1: T, x2: L, y2: H - B }),
      svg('line', { class: 'axis', x1: L, y1: H - B, x2: W - R, y2: H - B }));
    const label = (txt, ax, ay, anchor) => {
      const t = svg('text', { x: ax, y: ay, 'text-anchor': anchor });
      t.textContent = txt;
      return t;
    };
    const fmtV = (v) => (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2));
    // Time ticks: the time of day when the span is under a day, else the
    // date and time (UTC, like every time on the page).
    const tick = (t) => fmtTime(new Date(t).toISOString()).slice(t1 - t0 < 86400000 ? 11 : 5, t1 - t0 < 86400000 ? 19 : 16);
    s.append(label(fmtV(vmax), L - 4, T + 8, 'end'), label('0', L - 4, H - B, 'end'), label(tick(t0), L, H - 8, 'start'));
    if (t1 !== t0) s.append(label(tick(t1), W - R, H - 8, 'end'));
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
        const span = el('span', { text: se.name });
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
    try {
      info = await loadInfo();
      showAuthError(null);
    } catch (err) {
      showAuthError(err);
    }
    const panels = [
      ['verification', () => (info ? loadVerification(info) : Promise.reject(new Error('node info unavailable')))],
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
    refreshing = false;
    refreshTimer = setTimeout(refresh, refreshSeconds * 1000);
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
        const r = await fetch('/v1/subscribe?from=' + from, { headers: headers(), cache: 'no-store', signal });
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
    $('#detail-close').addEventListener('click', () => {
      $('#detail').hidden = true;
      selected = null;
      for (const c of document.querySelectorAll('#matrix td.selected')) c.classList.remove('selected');
    });
    $('#detail-load').addEventListener('click', loadProvingEvent);
    restartTail();
    refresh();
  });
})();
