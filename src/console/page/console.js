/* warm console: the script of warmd's browser console (docs/console.md).
 *
 * No framework and no request beyond warmd's own routes. Every string from warmd (model ids,
 * device names, errors) reaches the page as text only: textContent, createTextNode, title and
 * data-* attributes; never as HTML.
 *
 * Structure:
 *   1. Helpers       el(), setText(), syncChildren(), number/byte/time formats.
 *   2. Network       api(): fetch with the tab's bearer token (sessionStorage 'warm.token');
 *                    a 401 opens the token form and pauses polling until a token is given.
 *                    poller(): one run at a time, rescheduled by the delay the run returns.
 *   3. Feed          GET /console/feed once a second (events_after/series_after), backing off
 *                    to 5 s while it fails; applyFeed() renders each section from the answer:
 *                    header, devices, loads, charts, cluster, events.
 *   4. Models        GET /console/models paged every 5 s into arrays (rows as sent); filter and
 *                    sort in JS; a virtualized table draws only the rows in view.
 *   5. Actions       load/unload/retry per row and the move form: an in-page confirmation
 *                    dialog, the POST, then a toast.
 *   6. Start.
 *
 * Test hooks: window.warmConsole {ready, lastFeed, models, firstRenderMs}; ids conn, devices,
 * models-count, model-filter, events, confirm-ok, confirm-cancel; each model row carries
 * data-model and its buttons data-action="load|unload|retry".
 */
'use strict';
(() => {
  // ---------------------------------------------------------------------------------------
  // 1. Helpers

  const $ = (id) => document.getElementById(id);

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function setText(e, text) {
    const s = String(text);
    if (e.textContent !== s) e.textContent = s;
  }

  function setTitle(e, text) {
    const s = String(text);
    if (e.title !== s) e.title = s;
  }

  // Makes `parent` hold exactly n children, adding make()'s or removing from the end; returns them.
  function syncChildren(parent, n, make) {
    while (parent.children.length > n) parent.lastElementChild.remove();
    if (parent.children.length < n) {
      const frag = document.createDocumentFragment();
      for (let i = parent.children.length; i < n; i++) frag.append(make());
      parent.append(frag);
    }
    return parent.children;
  }

  const isNum = (v) => typeof v === 'number' && Number.isFinite(v);
  const intFormat = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });
  const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];

  function fmtBytes(n) {
    if (!isNum(n)) return '–';
    let v = Math.abs(n);
    let i = 0;
    while (v >= 1024 && i < UNITS.length - 1) { v /= 1024; i++; }
    const digits = i === 0 ? 0 : v < 10 ? 2 : v < 100 ? 1 : 0;
    return (n < 0 ? '-' : '') + v.toFixed(digits) + ' ' + UNITS[i];
  }

  const fmtInt = (n) => (isNum(n) ? intFormat.format(n) : '–');

  function fmtCount(n) {
    if (!isNum(n)) return '–';
    if (Math.abs(n) >= 1e9) return (n / 1e9).toFixed(2) + ' G';
    if (Math.abs(n) >= 1e6) return (n / 1e6).toFixed(2) + ' M';
    return intFormat.format(n);
  }

  function fmtNum(n) {
    if (!isNum(n)) return '–';
    const a = Math.abs(n);
    if (a >= 1000) return fmtCount(Math.round(n));
    return n.toFixed(a >= 100 || n === Math.round(n) ? 0 : a >= 10 ? 1 : 2);
  }

  const pad2 = (n) => String(n).padStart(2, '0');

  // Seconds as text; a negative count (idle_seconds of a model never used) is a dash.
  function fmtSecs(s) {
    if (!isNum(s) || s < 0) return '–';
    if (s < 60) return s.toFixed(s < 10 ? 1 : 0) + ' s';
    const m = Math.floor(s / 60);
    if (m < 60) return `${m}m ${pad2(Math.floor(s % 60))}s`;
    const h = Math.floor(m / 60);
    if (h < 24) return `${h}h ${pad2(m % 60)}m`;
    return `${Math.floor(h / 24)}d ${h % 24}h`;
  }

  const fmtMs = (ms) => (!isNum(ms) ? '–' : ms < 1000 ? fmtNum(ms) + ' ms' : fmtSecs(ms / 1000));
  const fmtPct = (r) => (isNum(r) ? (r * 100).toFixed(1) + '%' : '–');

  function fmtClock(unixSeconds) {
    if (!isNum(unixSeconds)) return '–';
    const d = new Date(unixSeconds * 1000);
    return `${pad2(d.getHours())}:${pad2(d.getMinutes())}:${pad2(d.getSeconds())}`;
  }

  const pct = (part, whole) => (whole > 0 ? Math.max(0, Math.min(100, (part / whole) * 100)) : 0);
  const str = (v) => (v === null || v === undefined ? '' : String(v));
  const list = (v) => (Array.isArray(v) ? v : []);

  // A resident's colour by how long it has been idle: warm (just used) to cool (idle 30 min+).
  function recencyColor(idleSeconds) {
    const idle = isNum(idleSeconds) ? Math.max(0, idleSeconds) : 0;
    const t = Math.min(1, Math.log1p(idle) / Math.log1p(1800));
    const hue = 14 + t * 196;
    return `hsl(${hue.toFixed(0)} ${(82 - t * 32).toFixed(0)}% ${(54 + t * 8).toFixed(0)}%)`;
  }

  // The page's state, shared by the sections; tests read window.warmConsole.
  const S = { feed: null, eventsLast: null, seriesLast: null, points: [], events: [],
              feedFailures: 0, copies: null, clusterOn: false };
  const W = { ready: false, lastFeed: 0, models: 0, firstRenderMs: null };
  window.warmConsole = W;

  // ---------------------------------------------------------------------------------------
  // 2. Network

  const TOKEN_KEY = 'warm.token';

  function getToken() {
    try { return sessionStorage.getItem(TOKEN_KEY) || ''; } catch (_) { return ''; }
  }

  function storeToken(token) {
    try { sessionStorage.setItem(TOKEN_KEY, token); } catch (_) { /* storage disabled */ }
  }

  class ApiError extends Error {
    constructor(status, message) { super(message); this.status = status; }
  }

  // GET (body undefined) or POST a JSON string; resolves to the answer's JSON object or throws an
  // ApiError carrying warmd's {"error": …} message. timeoutMs 0: wait as long as it takes.
  async function api(path, body, timeoutMs) {
    const headers = {};
    const token = getToken();
    if (token) headers.Authorization = 'Bearer ' + token;
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const ctrl = new AbortController();
    const timer = timeoutMs ? setTimeout(() => ctrl.abort(), timeoutMs) : 0;
    let res;
    try {
      res = await fetch(path, { method: body === undefined ? 'GET' : 'POST', headers, body,
                                cache: 'no-store', credentials: 'omit', signal: ctrl.signal });
    } catch (e) {
      clearTimeout(timer);
      throw new ApiError(0, ctrl.signal.aborted ? `no answer in ${timeoutMs / 1000} s`
                                                : 'cannot reach warmd');
    }
    let data = null;
    try { data = await res.json(); } catch (_) { /* not JSON: reported below */ }
    clearTimeout(timer);
    if (res.status === 401) {
      // An answer to a token replaced meanwhile asks nothing: the caller just tries again.
      if (getToken() === token) askToken(token !== '');
      throw new ApiError(401, data && typeof data.error === 'string' ? data.error : 'token needed');
    }
    if (!res.ok) {
      throw new ApiError(res.status, data && typeof data.error === 'string' ? data.error
                                                                          : `HTTP ${res.status}`);
    }
    if (data === null || typeof data !== 'object') throw new ApiError(res.status, 'answer is not JSON');
    return data;
  }

  const auth = { waiting: false };

  function askToken(refused) {
    if (auth.waiting) return;
    auth.waiting = true;
    const msg = $('auth-msg');
    msg.hidden = !refused;
    setText(msg, 'warmd refused the token this tab held; enter it again.');
    $('auth').hidden = false;
    setConn('token', 'token needed');
    $('auth-token').focus();
  }

  function onTokenSubmit(ev) {
    ev.preventDefault();
    const input = $('auth-token');
    const token = input.value.trim();
    if (!token) return;
    storeToken(token);
    input.value = '';
    auth.waiting = false;
    $('auth').hidden = true;
    setConn('wait', 'connecting…');
    feedPoll.kick();
    modelsPoll.kick();
  }

  // Runs `run` now (unless it runs already) and again after the delay in ms it resolves to;
  // null, or the token form being open, stops it until the form kicks it again.
  function poller(run) {
    const p = { busy: false, timer: 0 };
    p.kick = () => {
      if (p.busy) return;
      clearTimeout(p.timer);
      p.busy = true;
      run().catch((e) => { console.error(e); return 5000; }).then((delay) => {
        p.busy = false;
        if (delay !== null && !auth.waiting) p.timer = setTimeout(p.kick, delay);
      });
    };
    return p;
  }

  // ---------------------------------------------------------------------------------------
  // 3. Feed

  const feedPoll = poller(pollFeed);

  async function pollFeed() {
    const started = performance.now();
    const q = [];
    if (S.eventsLast !== null) q.push('events_after=' + S.eventsLast);
    if (S.seriesLast !== null) q.push('series_after=' + S.seriesLast);
    let feed;
    try {
      feed = await api('/console/feed' + (q.length ? '?' + q.join('&') : ''), undefined, 8000);
    } catch (e) {
      if (e.status === 401) return auth.waiting ? null : 0;
      S.feedFailures++;
      const delay = Math.min(5000, 1000 * S.feedFailures);
      showDisconnected(e.message, delay);
      return delay;
    }
    S.feedFailures = 0;
    applyFeed(feed);
    return Math.max(100, 1000 - (performance.now() - started));
  }

  function setConn(kind, text) {
    const c = $('conn');
    c.className = 'conn conn-' + kind;
    setText(c, text);
  }

  function showDisconnected(reason, delay) {
    setConn('down', 'disconnected');
    const b = $('banner');
    setText(b, `disconnected: ${reason} — trying again every ${Math.round(delay / 1000)} s`);
    b.hidden = false;
    document.body.classList.add('stale');
  }

  function applyFeed(f) {
    // A restarted warmd (its uptime went back) numbers its events from the start again.
    const restarted = S.feed && isNum(f.uptime_seconds) && f.uptime_seconds < S.feed.uptime_seconds - 1;
    if (S.eventsLast !== null && (restarted || (isNum(f.events_last) && f.events_last < S.eventsLast))) {
      S.events = [];
      $('events').replaceChildren();
      S.eventsLast = null;
    } else {
      mergeEvents(f);
    }
    mergeSeries(f.series);
    S.feed = f;
    $('banner').hidden = true;
    document.body.classList.remove('stale');
    setConn('live', 'live · ' + fmtClock(f.time));
    renderHeader(f);
    renderDevices(f);
    renderLoads(f);
    renderCharts();
    renderCluster(f);
    W.lastFeed = Date.now();
    markReady();
  }

  function markReady() {
    if (!W.ready && S.feed && M.loaded) W.ready = true;
  }

  // Header ------------------------------------------------------------------------------

  function renderHeader(f) {
    const t = f.totals || {};
    setText($('version'), f.version ? 'v' + f.version : '');
    setText($('t-uptime'), fmtSecs(f.uptime_seconds));
    setText($('t-registered'), fmtInt(t.registered));
    setTitle($('t-registered'), `${fmtInt(t.registered)} models, ${fmtInt(t.vmodels)} vmodels`);
    setText($('t-loaded'), fmtInt(t.loaded));
    setText($('t-requests'), fmtCount(t.requests));
    setTitle($('t-requests'), `${fmtInt(t.hits)} hits, ${fmtInt(t.misses)} misses, ` +
                              `${fmtInt(t.errors)} errors`);
    const seen = (t.hits || 0) + (t.misses || 0);
    setText($('t-hit'), seen > 0 ? fmtPct(t.hits / seen) : '–');
  }

  // Devices -----------------------------------------------------------------------------

  const deviceCards = new Map();

  function renderDevices(f) {
    const items = list(f.devices).map((d) => ({ key: 'device:' + str(d.name), d, tier: false }));
    if (f.tier && f.tier.open) items.push({ key: 'tier', d: f.tier, tier: true });
    const box = $('devices');
    const seen = new Set();
    items.forEach((item, i) => {
      let card = deviceCards.get(item.key);
      if (!card) {
        card = item.tier ? makeTierCard() : makeDeviceCard(str(item.d.name));
        deviceCards.set(item.key, card);
      }
      seen.add(item.key);
      if (box.children[i] !== card.root) box.insertBefore(card.root, box.children[i] || null);
      card.update(item.d);
    });
    for (const [key, card] of deviceCards) {
      if (!seen.has(key)) { card.root.remove(); deviceCards.delete(key); }
    }
  }

  function makeNums(names) {
    const dl = el('dl', 'nums');
    const dd = {};
    for (const n of names) {
      const div = el('div');
      dd[n] = el('dd');
      div.append(el('dt', '', n), dd[n]);
      dl.append(div);
    }
    return { root: dl, dd };
  }

  function makeStack(kinds) {
    const root = el('div', 'stack');
    const segs = kinds.map((k) => { const s = el('div', 'seg seg-' + k); root.append(s); return s; });
    return {
      root,
      update(values, total) {
        values.forEach((v, i) => {
          segs[i].style.width = pct(v, total) + '%';
          setTitle(segs[i], `${kinds[i]}: ${fmtBytes(v)}`);
        });
      },
    };
  }

  function makeCardHead(root, name, extra) {
    const head = el('header', 'card-head');
    const title = el('h3', '', name);
    const badge = el('span', 'badge');
    const state = el('span', 'dev-state');
    head.append(title, badge, state);
    const usage = el('div', 'usage');
    root.append(head, usage);
    return { badge, state, usage, extra };
  }

  function makeDeviceCard(name) {
    const root = el('article', 'card device');
    root.dataset.device = name;
    const h = makeCardHead(root, name);
    const stack = makeStack(['resident', 'reserved', 'draining']);
    const nums = makeNums(['capacity', 'used', 'reserved', 'draining']);
    const strip = el('div', 'strip');
    const note = el('div', 'strip-note');
    const victims = el('ol', 'victims');
    root.append(stack.root, nums.root, strip, note, el('h4', '', 'next victims'), victims);
    return {
      root,
      update(d) {
        const cap = isNum(d.capacity) ? d.capacity : 0;
        const used = d.used || 0;
        const reserved = d.reserved || 0;
        const draining = d.draining || 0;
        setText(h.badge, str(d.policy));
        setText(h.state, str(d.state));
        h.state.hidden = !d.state;
        setText(h.usage, `${fmtBytes(used)} of ${fmtBytes(cap)} · ${pct(used, cap).toFixed(0)}%`);
        stack.update([Math.max(0, used - reserved - draining), reserved, draining], cap);
        setText(nums.dd.capacity, fmtBytes(cap));
        setText(nums.dd.used, fmtBytes(used));
        setText(nums.dd.reserved, fmtBytes(reserved));
        setText(nums.dd.draining, fmtBytes(draining));
        renderStrip(strip, note, d, cap > 0 ? cap : Math.max(1, used));
        renderVictims(victims, list(d.residents).slice(0, 5));
      },
    };
  }

  function makeTierCard() {
    const root = el('article', 'card device tier');
    root.dataset.device = 'disk tier';
    const h = makeCardHead(root, 'disk tier');
    const stack = makeStack(['used', 'reserved']);
    const nums = makeNums(['capacity', 'used', 'reserved', 'files', 'hits', 'misses', 'evictions']);
    root.append(stack.root, nums.root);
    return {
      root,
      update(t) {
        setText(h.badge, 'remote files');
        h.state.hidden = true;
        const cap = t.capacity || 0;
        setText(h.usage, `${fmtBytes(t.used)} of ${fmtBytes(cap)} · ${pct(t.used, cap).toFixed(0)}%`);
        stack.update([t.used || 0, t.reserved || 0], cap);
        setText(nums.dd.capacity, fmtBytes(cap));
        setText(nums.dd.used, fmtBytes(t.used));
        setText(nums.dd.reserved, fmtBytes(t.reserved));
        setText(nums.dd.files, fmtInt(t.files));
        setText(nums.dd.hits, fmtInt(t.hits));
        setText(nums.dd.misses, fmtInt(t.misses));
        setText(nums.dd.evictions, fmtInt(t.evictions));
      },
    };
  }

  const MAX_SEGMENTS = 400;

  // One segment per resident, in eviction order, width ∝ bytes of the capacity; those too
  // small to see share one grey segment at the end. Segments are reused between feeds.
  function renderStrip(strip, note, d, cap) {
    const residents = list(d.residents);
    const minBytes = cap * 0.0015;
    const shown = [];
    let restBytes = 0;
    let restCount = 0;
    for (const r of residents) {
      if (shown.length < MAX_SEGMENTS && (r.bytes || 0) >= minBytes) shown.push(r);
      else { restBytes += r.bytes || 0; restCount++; }
    }
    const segs = syncChildren(strip, shown.length + (restCount ? 1 : 0), () => el('div', 'res'));
    shown.forEach((r, i) => {
      const seg = segs[i];
      seg.className = 'res';
      seg.style.width = pct(r.bytes, cap) + '%';
      seg.style.backgroundColor = recencyColor(r.idle_seconds);
      setTitle(seg, `${str(r.model)}\n${fmtBytes(r.bytes)} · ${fmtInt(r.uses)} uses · ` +
                    `idle ${fmtSecs(r.idle_seconds)}` +
                    (r.in_flight ? ` · ${fmtInt(r.in_flight)} in flight` : ''));
    });
    if (restCount) {
      const seg = segs[shown.length];
      seg.className = 'res rest';
      seg.style.width = pct(restBytes, cap) + '%';
      seg.style.backgroundColor = '';
      setTitle(seg, `${fmtInt(restCount)} smaller models, ${fmtBytes(restBytes)}`);
    }
    const total = isNum(d.residents_total) ? d.residents_total : residents.length;
    setText(note, `${fmtInt(total)} resident` + (total === 1 ? '' : 's') +
                  (total > residents.length ? ` (first ${fmtInt(residents.length)} shown)` : '') +
                  ` · ${fmtInt(d.evictions)} evictions`);
  }

  function renderVictims(ol, victims) {
    const items = syncChildren(ol, victims.length, () => {
      const li = el('li');
      li.append(el('span', 'v-model'), el('span', 'v-meta'));
      return li;
    });
    victims.forEach((r, i) => {
      const [model, meta] = items[i].children;
      setText(model, str(r.model));
      setTitle(model, str(r.model));
      setText(meta, `${fmtBytes(r.bytes)} · idle ${fmtSecs(r.idle_seconds)}`);
    });
    ol.classList.toggle('is-empty', victims.length === 0);
  }

  // Loads -------------------------------------------------------------------------------

  const LOADS_SHOWN = 8;

  function renderLoads(f) {
    fillTable('queue', f.queue, f.queue_total, (q) => [
      modelCell(q.model), q.waiting ? 'waiting' : 'proactive', fmtInt(q.waiters), fmtMs(q.age_ms)]);
    fillTable('running', f.running, f.running_total, (r) => [
      modelCell(r.model), str(r.device), str(r.phase), fmtInt(r.attempt), fmtInt(r.waiters),
      fmtMs(r.elapsed_ms), fmtBytes(r.bytes)]);
    fillTable('failures', f.failures, f.failures_total, (x) => [
      modelCell(x.model), str(x.device), str(x.code), { text: str(x.error), title: str(x.error) },
      fmtSecs(x.expires_in_seconds)]);
  }

  const modelCell = (id) => ({ text: str(id), title: str(id) });

  // Fills table `id` with the first LOADS_SHOWN items, each row's cells from cells(item): a
  // string or {text, title}; "+N more" counts what the table leaves out of `total`.
  function fillTable(id, items, total, cells) {
    items = list(items);
    const all = isNum(total) ? total : items.length;
    const shown = items.slice(0, LOADS_SHOWN);
    const tbody = $(id).tBodies[0];
    const rows = syncChildren(tbody, shown.length, () => el('tr'));
    shown.forEach((item, i) => {
      const values = cells(item);
      const tds = syncChildren(rows[i], values.length, () => el('td'));
      values.forEach((v, j) => {
        const text = typeof v === 'object' ? v.text : v;
        setText(tds[j], text);
        if (typeof v === 'object') setTitle(tds[j], v.title);
      });
    });
    setText($(id + '-count'), fmtInt(all));
    const more = $(id + '-more');
    more.hidden = false;
    setText(more, all > shown.length ? `+${fmtInt(all - shown.length)} more`
                                     : shown.length === 0 ? 'none' : '');
    more.classList.toggle('is-none', shown.length === 0);
  }

  // Charts ------------------------------------------------------------------------------

  const WINDOW_SECONDS = 900;
  const perSecond = (v) => fmtNum(v);
  const CHARTS = [
    { key: 'rps', lines: [['requests_per_second', '#e8663d']], fmt: perSecond },
    { key: 'hit', lines: [['hit_ratio', '#2f9e6e']], fmt: fmtPct, max: 1 },
    { key: 'loads', lines: [['loads_per_second', '#3b7dd8']], fmt: perSecond },
    { key: 'evictions', lines: [['evictions_per_second', '#8a5cc2']], fmt: perSecond },
    { key: 'bytes', lines: [['load_bytes_per_second', '#d4900f']], fmt: (v) => fmtBytes(v) + '/s',
      binary: true },
    { key: 'latency', lines: [['p99_ms', '#c8443a'], ['p50_ms', '#3b7dd8']],
      fmt: (v) => fmtNum(v) + ' ms',
      now: (p) => `${fmtLatency(p.p50_ms)} / ${fmtLatency(p.p99_ms)} ms` },
  ];

  function fmtLatency(ms) {
    return !isNum(ms) ? '–' : ms < 10 ? ms.toFixed(2) : ms.toFixed(0);
  }

  function initCharts() {
    for (const c of CHARTS) {
      const fig = document.querySelector(`figure[data-chart="${c.key}"]`);
      c.canvas = fig.querySelector('canvas');
      c.nowEl = fig.querySelector('.now');
    }
  }

  function mergeSeries(series) {
    const points = series ? list(series.points) : [];
    for (const p of points) {
      if (!isNum(p.t) || (S.seriesLast !== null && p.t <= S.seriesLast)) continue;
      S.points.push(p);
      S.seriesLast = p.t;
    }
    if (S.points.length > WINDOW_SECONDS) S.points.splice(0, S.points.length - WINDOW_SECONDS);
  }

  function niceCeil(v) {
    if (!(v > 0)) return 1;
    const e = Math.pow(10, Math.floor(Math.log10(v)));
    const f = v / e;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10) * e;
  }

  // niceCeil in the unit fmtBytes will show, so that the axis reads 100 MiB/s, not 95.4.
  function niceCeilBinary(v) {
    let unit = 1;
    while (v >= unit * 1024) unit *= 1024;
    return Math.min(niceCeil(v / unit), 1024) * unit;
  }

  function renderCharts() {
    const dpr = window.devicePixelRatio || 1;
    const sizes = CHARTS.map((c) => [c.canvas.clientWidth, c.canvas.clientHeight]);
    CHARTS.forEach((c, i) => drawChart(c, S.points, sizes[i][0], sizes[i][1], dpr));
  }

  function drawChart(c, points, w, h, dpr) {
    const last = points.length ? points[points.length - 1] : null;
    setText(c.nowEl, last ? (c.now ? c.now(last) : c.fmt(last[c.lines[0][0]])) : '–');
    if (w <= 0 || h <= 0) return;
    const cw = Math.round(w * dpr);
    const ch = Math.round(h * dpr);
    if (c.canvas.width !== cw || c.canvas.height !== ch) { c.canvas.width = cw; c.canvas.height = ch; }
    const ctx = c.canvas.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, h);
    let max = c.max || 0;
    if (!c.max) for (const p of points) for (const [f] of c.lines) max = Math.max(max, +p[f] || 0);
    max = c.max || (c.binary ? niceCeilBinary(max) : niceCeil(max));
    const top = 14;
    const bottom = h - 14;
    const tEnd = last ? last.t : 0;
    const x = (t) => ((t - (tEnd - WINDOW_SECONDS)) / WINDOW_SECONDS) * w;
    const y = (v) => bottom - (Math.max(0, Math.min(max, +v || 0)) / max) * (bottom - top);
    drawAxes(ctx, c, max, w, top, bottom);
    c.lines.forEach(([field, colour], i) => {
      ctx.beginPath();
      let prev = null;
      for (const p of points) {
        if (prev === null || p.t - prev > 5) ctx.moveTo(x(p.t), y(p[field]));
        else ctx.lineTo(x(p.t), y(p[field]));
        prev = p.t;
      }
      ctx.strokeStyle = colour;
      ctx.lineWidth = 1.5;
      ctx.lineJoin = 'round';
      ctx.stroke();
      if (i === 0 && points.length > 1) fillUnder(ctx, points, x, y, field, colour, bottom);
    });
  }

  function drawAxes(ctx, c, max, w, top, bottom) {
    ctx.strokeStyle = '#e6e9ef';
    ctx.lineWidth = 1;
    ctx.beginPath();
    for (const yy of [top, (top + bottom) / 2, bottom]) {
      ctx.moveTo(0, Math.round(yy) + 0.5);
      ctx.lineTo(w, Math.round(yy) + 0.5);
    }
    ctx.stroke();
    ctx.fillStyle = '#8a93a3';
    ctx.font = '10px system-ui, -apple-system, "Segoe UI", sans-serif';
    ctx.textBaseline = 'bottom';
    ctx.textAlign = 'left';
    ctx.fillText(c.fmt(max), 2, top - 1);
    ctx.textBaseline = 'top';
    ctx.fillText('−15 min', 2, bottom + 2);
    ctx.textAlign = 'right';
    ctx.fillText('now', w - 2, bottom + 2);
  }

  function fillUnder(ctx, points, x, y, field, colour, bottom) {
    ctx.beginPath();
    ctx.moveTo(x(points[0].t), bottom);
    for (const p of points) ctx.lineTo(x(p.t), y(p[field]));
    ctx.lineTo(x(points[points.length - 1].t), bottom);
    ctx.closePath();
    ctx.globalAlpha = 0.12;
    ctx.fillStyle = colour;
    ctx.fill();
    ctx.globalAlpha = 1;
  }

  // Cluster -----------------------------------------------------------------------------

  function renderCluster(f) {
    const c = f.cluster && typeof f.cluster === 'object' ? f.cluster : null;
    $('sec-cluster').hidden = !c;
    $('nav-cluster').hidden = !c;
    if (!!c !== S.clusterOn) {
      S.clusterOn = !!c;
      $('models-viewport').classList.toggle('with-copies', S.clusterOn);
    }
    if (!c) { S.copies = null; return; }
    setText($('cluster-name'), `${str(c.name)} · this instance: ${str(c.instance)}` +
                               (c.joined ? '' : ' (not joined)'));
    const err = $('cluster-error');
    err.hidden = !c.last_error;
    setText(err, c.last_error ? 'last error: ' + c.last_error : '');
    renderClusterCounters(c);
    const instances = list(c.instances);
    renderInstances(instances);
    S.copies = copiesMap(instances);
    updateCopiesLookup();
    scheduleModels(false);
  }

  function renderClusterCounters(c) {
    const names = [['forwarded', 'forwarded'], ['fell_back', 'fell back'], ['placed', 'placed'],
                   ['claims_lost', 'claims lost']];
    const divs = syncChildren($('cluster-counters'), names.length, () => {
      const d = el('div');
      d.append(el('dt'), el('dd'));
      return d;
    });
    names.forEach(([key, label], i) => {
      setText(divs[i].children[0], label);
      setText(divs[i].children[1], fmtInt(c[key]));
    });
  }

  function makeInstanceRow() {
    const tr = el('tr');
    for (let i = 0; i < 7; i++) tr.append(el('td'));
    const cells = tr.children;
    cells[0].append(el('span', 'i-name'), el('span', 'badge self', 'self'));
    cells[2].append(el('span', 'badge'));
    cells[3].className = 'cap';
    const bar = el('div', 'minibar');
    bar.append(el('div', 'fill'));
    cells[3].append(bar, el('span', 'cap-text'));
    for (const i of [4, 5, 6]) cells[i].className = 'num';
    return tr;
  }

  function renderInstances(instances) {
    const rows = syncChildren($('instances').tBodies[0], instances.length, makeInstanceRow);
    instances.forEach((inst, i) => {
      const cells = rows[i].children;
      setText(cells[0].children[0], str(inst.name));
      cells[0].children[1].hidden = !inst.self;
      setText(cells[1], str(inst.address));
      const badge = cells[2].children[0];
      badge.className = 'badge ' + (inst.draining ? 'b-warn' : 'b-ok');
      setText(badge, inst.draining ? 'draining' : 'serving');
      cells[3].children[0].children[0].style.width = pct(inst.used, inst.capacity) + '%';
      setText(cells[3].children[1], `${fmtBytes(inst.used)} / ${fmtBytes(inst.capacity)}`);
      setText(cells[4], fmtInt(inst.models_loaded));
      setText(cells[5], fmtInt(inst.loads_in_flight));
      setText(cells[6], fmtSecs(inst.updated_seconds_ago) + ' ago');
    });
  }

  // model id → {resident: [instance names], loading: [instance names]}
  function copiesMap(instances) {
    const map = new Map();
    const entry = (id) => {
      let e = map.get(id);
      if (!e) { e = { resident: [], loading: [] }; map.set(id, e); }
      return e;
    };
    for (const inst of instances) {
      const name = str(inst.name);
      for (const id of list(inst.residents)) entry(str(id)).resident.push(name);
      for (const id of list(inst.loading)) entry(str(id)).loading.push(name);
    }
    return map;
  }

  function copiesText(id) {
    const e = S.copies && S.copies.get(id);
    if (!e) return '';
    return e.resident.join(', ') + (e.loading.length ? ` (+${e.loading.join(', ')} loading)` : '');
  }

  function updateCopiesLookup() {
    const id = $('copies-input').value;
    const out = $('copies-result');
    if (!id) { setText(out, ''); return; }
    const e = S.copies && S.copies.get(id);
    if (!e) { setText(out, 'no instance holds it'); return; }
    const parts = [];
    if (e.resident.length) parts.push('resident on ' + e.resident.join(', '));
    if (e.loading.length) parts.push('loading on ' + e.loading.join(', '));
    setText(out, parts.join('; '));
  }

  // Events ------------------------------------------------------------------------------

  const MAX_EVENTS = 1000;   // kept, as warmd keeps them
  const SHOWN_EVENTS = 200;  // drawn: a thousand list items cost the first view a third of a second
  const EVENT_KINDS = new Set(['queued', 'loading', 'loaded', 'evicted', 'unloaded', 'cancelled',
                               'retry', 'failed', 'unregistered', 'version']);

  function mergeEvents(f) {
    const fresh = list(f.events).filter((e) => S.eventsLast === null || e.seq > S.eventsLast);
    if (isNum(f.events_last)) S.eventsLast = Math.max(S.eventsLast || 0, f.events_last);
    if (fresh.length === 0) return;
    applyStateEvents(fresh);
    S.events = fresh.concat(S.events).slice(0, MAX_EVENTS);
    const ol = $('events');
    const frag = document.createDocumentFragment();
    for (const e of fresh.slice(0, SHOWN_EVENTS)) frag.append(eventItem(e));
    ol.insertBefore(frag, ol.firstChild);
    while (ol.childElementCount > SHOWN_EVENTS) ol.lastElementChild.remove();
    setText($('events-count'), `newest ${fmtInt(ol.childElementCount)} of ${fmtInt(S.events.length)}`);
  }

  function eventItem(e) {
    const kind = str(e.kind);
    const li = el('li', 'ev');
    li.dataset.kind = kind;
    const time = el('time', 'ev-time', fmtClock(e.t));
    if (isNum(e.t)) time.title = new Date(e.t * 1000).toISOString();
    const badge = el('span', 'kind k-' + (EVENT_KINDS.has(kind) ? kind : 'other'), kind);
    const model = el('span', 'ev-model', str(e.model));
    model.title = str(e.model);
    const from = str(e.from);
    const to = str(e.to);
    const trans = el('span', 'ev-trans', from || to ? `${from || '·'} → ${to || '·'}` : '');
    const device = el('span', 'ev-device', str(e.device));
    const why = el('span', e.error ? 'ev-why err' : 'ev-why', str(e.error || e.reason));
    why.title = str(e.error || e.reason);
    li.append(time, badge, model, trans, device, why);
    return li;
  }

  // ---------------------------------------------------------------------------------------
  // 4. Models

  const ROW_H = 28;
  const BUFFER_ROWS = 10;
  const STATE_ORDER = ['LOADED', 'LOADING', 'QUEUED', 'NOT_LOADED', 'LOADING_FAILED'];
  const KNOWN_STATES = new Set(STATE_ORDER);
  const COLS = [
    { key: 'id', label: 'model' },
    { key: 'state', label: 'state' },
    { key: 'device', label: 'device' },
    { key: 'version', label: 'ver', num: true, fmt: (v) => (v === null || v === undefined ? '' : String(v)) },
    { key: 'bytes', label: 'size', num: true, fmt: fmtBytes },
    { key: 'requests_per_second', label: 'req/s', num: true, fmt: fmtNum },
    { key: 'requests', label: 'requests', num: true, fmt: fmtInt },
    { key: 'hits', label: 'hits', num: true, fmt: fmtInt },
    { key: 'loads', label: 'loads', num: true, fmt: fmtInt },
    { key: 'mean_load_ms', label: 'load time', num: true, fmt: (v) => (v ? fmtMs(v) : '–') },
    { key: 'batching', label: 'batching' },
    { key: 'idle_seconds', label: 'idle', num: true, fmt: fmtSecs },
    { key: 'error', label: 'error' },
    { key: 'copies', label: 'copies', num: true },
  ];
  const ACTION_BUTTONS = [['load', 'Load'], ['unload', 'Unload'], ['retry', 'Retry']];

  const M = { idx: {}, rows: [], byId: new Map(), view: [], loaded: false, sortKey: 'id', sortDir: 1, filter: '',
              state: null, device: null, stateOpts: [], deviceOpts: [], pool: [],
              viewDirty: false, raf: 0, error: '' };

  const modelsPoll = poller(pollModels);

  async function pollModels() {
    let columns = null;
    const rows = [];
    let after = null;
    try {
      for (;;) {
        const q = after === null ? '' : '?after=' + encodeURIComponent(after);
        const page = await api('/console/models' + q, undefined, 30000);
        if (!Array.isArray(page.columns) || !Array.isArray(page.rows)) {
          throw new ApiError(0, 'unexpected answer');
        }
        columns = page.columns;
        for (const r of page.rows) if (Array.isArray(r)) rows.push(r);
        const next = page.next === null || page.next === undefined ? null : String(page.next);
        if (next === null || next === after || page.rows.length === 0) break;
        after = next;
      }
    } catch (e) {
      if (e.status === 401) return auth.waiting ? null : 0;
      M.error = 'models: ' + e.message;
      renderModels();
      return 5000;
    }
    M.error = '';
    setModels(columns, rows);
    return 5000;
  }

  // A state change in the feed's events moves its model's row at once, between the (slower)
  // refreshes of the whole list. `fresh` is newest first; applied oldest first.
  function applyStateEvents(fresh) {
    if (!M.loaded || M.idx.state === undefined) return;
    let changed = false;
    for (let i = fresh.length - 1; i >= 0; i--) {
      const e = fresh[i];
      const row = e.kind === 'version' ? undefined : M.byId.get(str(e.model));
      if (!row || !KNOWN_STATES.has(str(e.to))) continue;
      row[M.idx.state] = str(e.to);
      if (M.idx.device !== undefined) {
        row[M.idx.device] = e.to === 'LOADED' || e.to === 'LOADING' ? str(e.device) : '';
      }
      changed = true;
    }
    if (changed) scheduleModels(true);
  }

  function setModels(columns, rows) {
    M.idx = {};
    columns.forEach((name, i) => { M.idx[name] = i; });
    M.rows = rows;
    M.byId = new Map(rows.map((r) => [str(r[M.idx.id]), r]));
    M.loaded = true;
    updateSelects();
    M.viewDirty = true;
    renderModels();
    W.models = rows.length;
    if (W.firstRenderMs === null) W.firstRenderMs = performance.now();
    markReady();
  }

  function cellValue(row, key) {
    if (key === 'copies') {
      const e = S.copies && S.copies.get(str(row[M.idx.id]));
      return e ? e.resident.length : 0;
    }
    const i = M.idx[key];
    return i === undefined ? undefined : row[i];
  }

  function applyView() {
    const needle = M.filter.toLowerCase();
    const iId = M.idx.id;
    const iState = M.idx.state;
    const iDevice = M.idx.device;
    let view = M.rows;
    if (needle || M.state !== null || M.device !== null) {
      view = view.filter((r) => (!needle || str(r[iId]).toLowerCase().includes(needle)) &&
                                (M.state === null || str(r[iState]) === M.state) &&
                                (M.device === null || str(r[iDevice]) === M.device));
    }
    if (M.sortKey !== 'id' || M.sortDir !== 1) view = sortRows(view === M.rows ? view.slice() : view);
    M.view = view;
  }

  function sortRows(rows) {
    const col = COLS.find((c) => c.key === M.sortKey) || COLS[0];
    const dir = M.sortDir;
    const iId = M.idx.id;
    const byId = (a, b) => (a[iId] < b[iId] ? -1 : a[iId] > b[iId] ? 1 : 0);
    // Decorate once: a comparator that reads each value once per row, not per comparison.
    const keyed = rows.map((r) => {
      const v = cellValue(r, col.key);
      return [col.num ? (isNum(v) ? v : -Infinity) : str(v), r];
    });
    keyed.sort((a, b) => (a[0] < b[0] ? -dir : a[0] > b[0] ? dir : byId(a[1], b[1])));
    return keyed.map((k) => k[1]);
  }

  // Redraws the table on the next animation frame; refilter first when `view` is true.
  function scheduleModels(view) {
    if (view) M.viewDirty = true;
    if (!M.raf) M.raf = requestAnimationFrame(renderModels);
  }

  function renderModels() {
    if (M.raf) { cancelAnimationFrame(M.raf); M.raf = 0; }
    if (M.viewDirty && M.loaded) { applyView(); M.viewDirty = false; }
    const vp = $('models-viewport');
    const height = vp.clientHeight || 600;  // reads first, writes after
    const n = M.view.length;
    const first = Math.max(0, Math.min(Math.floor(vp.scrollTop / ROW_H) - BUFFER_ROWS, n - 1));
    const count = Math.max(0, Math.min(n - first, Math.ceil(height / ROW_H) + 2 * BUFFER_ROWS));
    $('models-spacer').style.height = n * ROW_H + 'px';
    ensurePool(count);
    for (let k = 0; k < M.pool.length; k++) {
      const row = M.pool[k];
      if (k < count) {
        fillRow(row, M.view[first + k]);
        if (row.hidden) row.hidden = false;
      } else if (!row.hidden) {
        row.hidden = true;
        delete row.dataset.model;
      }
    }
    $('models-rows').style.transform = `translateY(${first * ROW_H}px)`;
    $('models-empty').hidden = n > 0 || !M.loaded;
    const count_ = M.loaded ? `${fmtInt(n)} of ${fmtInt(M.rows.length)} models` : 'loading…';
    setText($('models-count'), M.error ? `${count_} · ${M.error}` : count_);
    $('models-count').classList.toggle('warn', !!M.error);
  }

  function ensurePool(count) {
    if (M.pool.length >= count) return;
    const frag = document.createDocumentFragment();
    while (M.pool.length < count) {
      const row = makeRow();
      M.pool.push(row);
      frag.append(row);
    }
    $('models-rows').append(frag);
  }

  function makeRow() {
    const row = el('div', 'mrow');
    row.setAttribute('role', 'row');
    row.cellEls = COLS.map((c) => {
      const cell = el('span', 'c c-' + c.key + (c.num ? ' num' : ''));
      cell.setAttribute('role', 'cell');
      row.append(cell);
      return cell;
    });
    row.stateBadge = el('span', 'st');
    row.cellEls[1].append(row.stateBadge);
    const actions = el('span', 'c c-actions');
    actions.setAttribute('role', 'cell');
    for (const [action, label] of ACTION_BUTTONS) {
      const b = el('button', 'btn small', label);
      b.type = 'button';
      b.dataset.action = action;
      actions.append(b);
    }
    row.append(actions);
    row.values = [];
    return row;
  }

  function fillRow(row, r) {
    const id = str(r[M.idx.id]);
    if (row.dataset.model !== id) row.dataset.model = id;
    COLS.forEach((c, j) => {
      const v = cellValue(r, c.key);
      const text = c.key === 'copies' ? copiesText(id) : c.fmt ? c.fmt(v) : str(v);
      if (row.values[j] === text) return;
      row.values[j] = text;
      if (j === 1) {
        row.stateBadge.textContent = text;
        row.stateBadge.className = 'st st-' + (KNOWN_STATES.has(text) ? text : 'other');
      } else {
        row.cellEls[j].textContent = text;
      }
      if (c.key === 'id' || c.key === 'error' || c.key === 'copies') row.cellEls[j].title = text;
    });
    const kind = str(cellValue(r, 'kind'));
    row.cellEls[0].title = kind ? `${id}\n${kind}` : id;
  }

  function buildHeader() {
    const head = $('models-head');
    for (const c of COLS) {
      const cell = el('span', 'c c-' + c.key + (c.num ? ' num' : ''));
      cell.setAttribute('role', 'columnheader');
      const b = el('button', 'sort', c.label);
      b.type = 'button';
      b.dataset.key = c.key;
      cell.append(b);
      head.append(cell);
    }
    const actions = el('span', 'c c-actions', 'actions');
    actions.setAttribute('role', 'columnheader');
    head.append(actions);
    markSort();
  }

  function markSort() {
    for (const cell of $('models-head').children) {
      const b = cell.firstElementChild;
      const on = b && b.dataset.key === M.sortKey;
      if (on) cell.setAttribute('aria-sort', M.sortDir > 0 ? 'ascending' : 'descending');
      else cell.removeAttribute('aria-sort');
    }
  }

  function onSortClick(ev) {
    const b = ev.target.closest('button.sort');
    if (!b) return;
    if (M.sortKey === b.dataset.key) M.sortDir = -M.sortDir;
    else { M.sortKey = b.dataset.key; M.sortDir = 1; }
    markSort();
    scheduleModels(true);
  }

  // The state and device selects list what the models hold; a choice no model has any more
  // stays listed while chosen.
  function updateSelects() {
    const states = new Map();
    const devices = new Map();
    const iState = M.idx.state;
    const iDevice = M.idx.device;
    for (const r of M.rows) {
      const s = str(r[iState]);
      const d = str(r[iDevice]);
      states.set(s, (states.get(s) || 0) + 1);
      devices.set(d, (devices.get(d) || 0) + 1);
    }
    if (M.state !== null && !states.has(M.state)) states.set(M.state, 0);
    if (M.device !== null && !devices.has(M.device)) devices.set(M.device, 0);
    const rank = (s) => (KNOWN_STATES.has(s) ? STATE_ORDER.indexOf(s) : STATE_ORDER.length);
    const stateList = [...states.keys()].sort((a, b) => rank(a) - rank(b) || (a < b ? -1 : 1));
    const deviceList = [...devices.keys()].sort((a, b) => (a === '' ? 1 : b === '' ? -1 : a < b ? -1 : 1));
    M.stateOpts = fillSelect($('state-filter'), M.stateOpts, stateList, M.state,
                             (s) => `${s} (${fmtInt(states.get(s))})`);
    M.deviceOpts = fillSelect($('device-filter'), M.deviceOpts, deviceList, M.device,
                              (d) => `${d || 'no device'} (${fmtInt(devices.get(d))})`);
  }

  // Options are indexes into `values` (option 0 is "all"), so no value is ever special.
  function fillSelect(select, old, values, current, label) {
    const same = old.length === values.length && old.every((v, i) => v === values[i]);
    if (!same) {
      syncChildren(select, values.length + 1, () => el('option'));
      values.forEach((v, i) => { select.options[i + 1].value = String(i); });
      select.value = current === null ? '' : String(values.indexOf(current));
    }
    values.forEach((v, i) => setText(select.options[i + 1], label(v)));
    return values;
  }

  function onSelect(ev) {
    const i = ev.target.value;
    if (ev.target.id === 'state-filter') M.state = i === '' ? null : M.stateOpts[+i];
    else M.device = i === '' ? null : M.deviceOpts[+i];
    $('models-viewport').scrollTop = 0;
    scheduleModels(true);
  }

  function onFilterInput(ev) {
    M.filter = ev.target.value;
    $('models-viewport').scrollTop = 0;
    scheduleModels(true);
  }

  // ---------------------------------------------------------------------------------------
  // 5. Actions

  const code = (id) => ({ code: id });
  const ACTIONS = {
    load: {
      title: 'Load model', button: 'Load', pending: 'Loading', done: 'Loaded',
      text: (b) => ['warmd forgets the failure records of ', code(b.model), ' and loads it onto a ' +
                    'device, evicting other models if it needs the room. It answers once the model ' +
                    'is loaded.'],
    },
    unload: {
      title: 'Unload model', button: 'Unload', pending: 'Unloading', done: 'Unloaded',
      text: (b) => [code(b.model), ' leaves its device and stays registered: requests being served ' +
                    'finish on it, and the next request loads it again.'],
    },
    retry: {
      title: 'Retry model', button: 'Retry', pending: 'Retrying', done: 'Failure records forgotten for',
      text: (b) => ['warmd forgets the failure records of ', code(b.model), ', so that its next ' +
                    'request tries to load it again. Nothing is loaded now.'],
    },
    move: {
      title: 'Move vmodel', button: 'Move', pending: 'Moving', done: 'Moved',
      text: (b) => ['vmodel ', code(b.vmodel), ' will point at model ', code(b.target), '. warmd ' +
                    'answers once ', code(b.target), ' serves; from then on requests for ',
                    code(b.vmodel), ' go to it.'],
    },
  };
  const subject = (b) => (b.vmodel !== undefined ? `${b.vmodel} → ${b.target}` : b.model);

  let confirmResolve = null;

  function confirmDialog(title, parts, okLabel) {
    if (confirmResolve) finishConfirm(false);
    const dialog = $('confirm');
    setText($('confirm-title'), title);
    $('confirm-text').replaceChildren(...parts.map((p) => (typeof p === 'string'
      ? document.createTextNode(p) : el('code', 'id', p.code))));
    setText($('confirm-ok'), okLabel);
    if (typeof dialog.showModal === 'function') dialog.showModal();
    else dialog.setAttribute('open', '');
    $('confirm-cancel').focus();
    return new Promise((resolve) => { confirmResolve = resolve; });
  }

  function finishConfirm(ok) {
    const resolve = confirmResolve;
    confirmResolve = null;
    const dialog = $('confirm');
    if (dialog.open) dialog.close();
    if (resolve) resolve(ok);
  }

  async function runAction(action, body) {
    const a = ACTIONS[action];
    if (!(await confirmDialog(a.title, a.text(body), a.button))) return;
    const toast = showToast('pending', `${a.pending} ${subject(body)}…`);
    try {
      await api('/console/actions/' + action, JSON.stringify(body), 0);
      updateToast(toast, 'ok', `${a.done} ${subject(body)}`);
      if (!auth.waiting) { modelsPoll.kick(); feedPoll.kick(); }
    } catch (e) {
      updateToast(toast, 'err', `${a.title} ${subject(body)} failed: ${e.message}`);
    }
  }

  function onRowClick(ev) {
    const b = ev.target.closest('button[data-action]');
    const row = b && b.closest('.mrow');
    if (!row || row.dataset.model === undefined) return;
    runAction(b.dataset.action, { model: row.dataset.model });
  }

  function onMoveSubmit(ev) {
    ev.preventDefault();
    const vmodel = $('move-vmodel').value.trim();
    const target = $('move-target').value.trim();
    if (!vmodel || !target) {
      showToast('err', 'Move needs a vmodel and a target model.');
      return;
    }
    runAction('move', { vmodel, target });
  }

  function showToast(kind, text) {
    const t = el('div', 'toast');
    t.setAttribute('role', kind === 'err' ? 'alert' : 'status');
    const msg = el('span', 'msg');
    const close = el('button', 'close', '×');
    close.type = 'button';
    close.title = 'dismiss';
    close.addEventListener('click', () => t.remove());
    t.append(msg, close);
    $('toasts').append(t);
    updateToast(t, kind, text);
    return t;
  }

  function updateToast(t, kind, text) {
    t.className = 'toast toast-' + kind;
    setText(t.firstElementChild, text);
    clearTimeout(t.timer);
    if (kind !== 'pending') t.timer = setTimeout(() => t.remove(), kind === 'err' ? 12000 : 6000);
  }

  // ---------------------------------------------------------------------------------------
  // 6. Start

  function start() {
    // Ask first: the models' pages are the longest wait, and nothing below needs their answers.
    modelsPoll.kick();
    feedPoll.kick();
    initCharts();
    buildHeader();
    $('models-head').addEventListener('click', onSortClick);
    $('models-rows').addEventListener('click', onRowClick);
    $('models-viewport').addEventListener('scroll', () => scheduleModels(false), { passive: true });
    $('model-filter').addEventListener('input', onFilterInput);
    $('state-filter').addEventListener('change', onSelect);
    $('device-filter').addEventListener('change', onSelect);
    $('move-form').addEventListener('submit', onMoveSubmit);
    $('auth-form').addEventListener('submit', onTokenSubmit);
    $('copies-input').addEventListener('input', updateCopiesLookup);
    $('confirm-ok').addEventListener('click', () => finishConfirm(true));
    $('confirm-cancel').addEventListener('click', () => finishConfirm(false));
    // Escape closes the dialog: a cancel. (A close left over from a dialog since reopened is not.)
    $('confirm').addEventListener('close', () => { if (!$('confirm').open) finishConfirm(false); });
    let resizeRaf = 0;
    window.addEventListener('resize', () => {
      if (resizeRaf) return;
      resizeRaf = requestAnimationFrame(() => { resizeRaf = 0; renderCharts(); renderModels(); });
    });
    renderModels();
  }

  start();
})();
