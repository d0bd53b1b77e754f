// The dashboard's shared pieces: the API client, element building, the notice and error
// lines, formatting, and the page life cycle (mount once, refresh every few seconds).
// No framework: the pages are small and the server ships every byte of them.
'use strict';

window.awa = window.awa || {};
(function (awa) {
  awa.pages = {};
  awa.info = { read_only: true, token_required: false, schema: '' };
  awa.REFRESH_MS = 3000;

  // An API call that failed: `status` is the HTTP status (0: no answer).
  class ApiError extends Error {
    constructor(status, message, body) {
      super(message);
      this.status = status;
      this.body = body;
    }
  }
  awa.ApiError = ApiError;

  // GET or POST under /api/. Resolves with the parsed body for 2xx (and for the statuses
  // in opts.accept); rejects with ApiError otherwise. A 401 sends the browser to the login.
  awa.api = async function (path, opts) {
    opts = opts || {};
    const init = { method: opts.method || 'GET', credentials: 'same-origin', headers: {} };
    if (init.method !== 'GET') {
      // The server's CSRF check: another origin cannot send this header without a CORS
      // preflight, which the server never grants.
      init.headers['X-Awa-Csrf'] = '1';
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(opts.body || {});
    }
    let res;
    try {
      res = await fetch(path, init);
    } catch (e) {
      throw new ApiError(0, 'awa serve is not answering (' + e.message + ')', null);
    }
    let body = null;
    try {
      body = await res.json();
    } catch (e) {
      body = null;
    }
    if (res.ok || (opts.accept && opts.accept.includes(res.status))) return body;
    if (res.status === 401 && awa.current && awa.current.name !== 'login') {
      location.assign('/login?next=' + encodeURIComponent(location.pathname + location.search));
    }
    const message = body && body.error ? body.error : 'HTTP ' + res.status;
    const extra = body && body.sqlstate ? ' (SQLSTATE ' + body.sqlstate + ')' : '';
    throw new ApiError(res.status, message + extra, body);
  };
  awa.post = (path, body) => awa.api(path, { method: 'POST', body: body });

  // h('td', {'data-col': 'lag', class: 'num'}, '12'): an element with attributes, event
  // handlers (onclick: fn) and children (strings become text; null/false are skipped).
  awa.h = function (tag, attrs, ...children) {
    const svg = tag.startsWith('svg:');
    const el = svg
      ? document.createElementNS('http://www.w3.org/2000/svg', tag.slice(4))
      : document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k.startsWith('on') && typeof v === 'function') {
        el.addEventListener(k.slice(2), v);
      } else if (k === 'text') {
        el.textContent = String(v);
      } else {
        el.setAttribute(k, v === true ? '' : String(v));
      }
    }
    for (const c of children.flat()) {
      if (c === null || c === undefined || c === false) continue;
      el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return el;
  };
  const h = awa.h;

  // Replaces the children of `el` (an id or an element).
  awa.fill = function (el, ...children) {
    if (typeof el === 'string') el = document.getElementById(el);
    el.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined));
    return el;
  };

  function line(id, text) {
    const el = document.getElementById(id);
    el.textContent = text || '';
    el.hidden = !text;
  }
  awa.showError = (text) => line('error', text);
  awa.notice = (text) => line('notice', text);

  awa.fmtAge = function (s) {
    if (s === null || s === undefined) return '—';
    if (s < 60) return s.toFixed(1) + ' s';
    if (s < 3600) return (s / 60).toFixed(1) + ' min';
    if (s < 86400) return (s / 3600).toFixed(1) + ' h';
    return (s / 86400).toFixed(1) + ' d';
  };
  awa.fmtTime = (iso) => (iso ? iso.replace('T', ' ').replace(/\.\d+/, '') : '—');
  awa.orDash = (v) => (v === null || v === undefined || v === '' ? '—' : String(v));
  awa.sum = (xs) => xs.reduce((a, b) => a + b, 0);

  awa.STATES = ['waiting', 'available', 'running', 'scheduled', 'retryable', 'completed',
    'failed', 'cancelled', 'dlq'];
  awa.JOB_STATES = ['waiting', 'scheduled', 'retryable', 'available', 'running',
    'waiting_external', 'completed', 'failed', 'cancelled', 'dlq'];

  // The query string of the current URL as an object, and a URL of `path` with `params`
  // (empty values dropped): filters live in the URL so a page can be shared.
  awa.query = () => Object.fromEntries(new URLSearchParams(location.search));
  awa.url = function (path, params) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params || {})) {
      if (v !== null && v !== undefined && v !== '') q.set(k, v);
    }
    const s = q.toString();
    return s ? path + '?' + s : path;
  };

  // The queue filter of the jobs and DLQ pages: "any queue" and the URL's queue at once,
  // every other queue when /api/queues has answered (fillQueues).
  awa.queueSelect = function (current) {
    const select = h('select', { name: 'queue' }, h('option', { value: '' }, 'any queue'));
    if (current) select.append(h('option', { value: current, selected: true }, current));
    return select;
  };
  awa.fillQueues = function (queues, current) {
    const select = document.querySelector('#filters select[name=queue]');
    for (const x of queues) {
      if (x.queue !== current) select.append(h('option', { value: x.queue }, x.queue));
    }
  };

  // A button for a state-changing action; none in read-only mode. `run` returns the
  // notice text; the page refreshes right after.
  awa.action = function (id, label, run, cls) {
    if (awa.info.read_only) return null;
    return h('button', {
      id: id,
      type: 'button',
      class: cls || null,
      onclick: async (ev) => {
        const b = ev.currentTarget;
        b.disabled = true;
        try {
          const text = await run();
          if (text) awa.notice(text);
          awa.showError('');
        } catch (e) {
          awa.showError(e.message);
        } finally {
          b.disabled = false;
          awa.refreshNow();
        }
      },
    }, label);
  };

  // A table: `columns` as [key, title]; the body is filled by the page.
  awa.table = function (id, columns, opts) {
    opts = opts || {};
    const head = h('tr', null,
      opts.select ? h('th', null, h('input', { type: 'checkbox', id: 'select-all',
        'aria-label': 'select all', onchange: (ev) => {
          for (const box of document.querySelectorAll('#' + id + ' input.select')) {
            box.checked = ev.target.checked;
            box.dispatchEvent(new Event('change'));
          }
        } })) : null,
      columns.map(([key, title]) => h('th', { 'data-col': key }, title)));
    return h('table', { id: id }, h('thead', null, head), h('tbody'));
  };

  // Checked row ids of a selectable table survive the refreshes that rebuild its rows.
  awa.Selection = class {
    constructor() { this.ids = new Set(); }
    box(id) {
      return h('input', {
        type: 'checkbox', class: 'select', 'aria-label': 'select ' + id,
        checked: this.ids.has(String(id)),
        onchange: (ev) => {
          if (ev.target.checked) this.ids.add(String(id)); else this.ids.delete(String(id));
        },
      });
    }
    keep(shownIds) {
      const shown = new Set(shownIds.map(String));
      for (const id of [...this.ids]) if (!shown.has(id)) this.ids.delete(id);
    }
    list() { return [...this.ids]; }
  };

  // Runs one request per id; returns "verb n, refused m (first reason)".
  awa.each = async function (ids, verb, request) {
    let ok = 0;
    const refused = [];
    for (const id of ids) {
      try {
        await request(id);
        ok += 1;
      } catch (e) {
        refused.push(id + ': ' + e.message);
      }
    }
    let text = verb + ' ' + ok;
    if (refused.length) text += ', refused ' + refused.length + ' (' + refused[0] + ')';
    return text;
  };

  // --- life cycle ---------------------------------------------------------------------
  let timer = null;
  let generation = 0;

  async function refresh() {
    const page = awa.current;
    const mine = generation;
    clearTimeout(timer);
    try {
      await page.refresh();
      if (mine !== generation) return;
      awa.showError('');
      const main = document.getElementById('page');
      main.dataset.loaded = String(Number(main.dataset.loaded) + 1);
    } catch (e) {
      if (mine !== generation) return;
      awa.showError(e.message);
      const main = document.getElementById('page');
      main.dataset.failed = String(Number(main.dataset.failed || 0) + 1);
    }
    if (page.refreshes !== false) timer = setTimeout(refresh, awa.REFRESH_MS);
  }
  awa.refreshNow = () => {
    generation += 1;
    refresh();
  };

  awa.start = async function () {
    const path = location.pathname;
    let name = 'overview';
    let arg = null;
    let m;
    if ((m = path.match(/^\/queues\/([^/]+)$/))) [name, arg] = ['queue', decodeURIComponent(m[1])];
    else if ((m = path.match(/^\/jobs\/([^/]+)$/))) [name, arg] = ['job', decodeURIComponent(m[1])];
    else if ((m = path.match(/^\/batches\/([^/]+)$/))) [name, arg] = ['batch', decodeURIComponent(m[1])];
    else if (path === '/jobs') name = 'jobs';
    else if (path === '/batches') name = 'batches';
    else if (path === '/dlq') name = 'dlq';
    else if (path === '/storage') name = 'storage';
    else if (path === '/login') name = 'login';
    const page = Object.assign({ name: name, arg: arg }, awa.pages[name]);
    awa.current = page;
    const main = document.getElementById('page');
    main.dataset.page = name;
    for (const a of document.querySelectorAll('header nav a')) {
      const section = name === 'job' ? 'jobs' : name === 'batch' ? 'batches' : name;
      a.classList.toggle('current', a.id === 'nav-' + section ||
        (name === 'queue' && a.id === 'nav-overview'));
    }
    if (name !== 'login') {
      try {
        awa.info = await awa.api('/api/info');
      } catch (e) {
        awa.showError(e.message);
        return;
      }
      document.body.classList.toggle('read-only', awa.info.read_only);
      awa.fill('server-info', 'schema ' + awa.info.schema +
        (awa.info.read_only ? ' · read-only' : ''));
    }
    main.replaceChildren();
    page.mount(main);
    refresh();
  };
})(window.awa);
