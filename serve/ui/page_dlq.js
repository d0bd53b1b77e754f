// Dead letters: filtered by queue and kind (in the URL); retry or purge the selected
// ones, or every one matching the filter. Without a filter the bulk actions ask first
// and then send all=true: the API refuses an unfiltered bulk action otherwise.
'use strict';

(function (awa) {
  const h = awa.h;
  const LIMIT = 200;

  function filters(q) {
    const queueSelect = awa.queueSelect(q.queue);
    return h('form', {
      id: 'filters', class: 'filters',
      onsubmit: (ev) => {
        ev.preventDefault();
        const f = new FormData(ev.target);
        location.assign(awa.url('/dlq', { queue: f.get('queue'), kind: f.get('kind') }));
      },
    }, h('label', null, 'Queue ', queueSelect),
    h('label', null, 'Kind ', h('input', { name: 'kind', value: q.kind || '', size: 16 })),
    h('button', { type: 'submit' }, 'Filter'));
  }

  function row(e, selection) {
    const last = e.errors.length ? e.errors[e.errors.length - 1].error : '';
    return h('tr', { 'data-job-id': e.id },
      awa.info.read_only ? null : h('td', null, selection.box(e.id)),
      h('td', { 'data-col': 'id', class: 'num' }, h('a', { href: '/jobs/' + e.id }, String(e.id))),
      h('td', { 'data-col': 'queue' }, e.queue),
      h('td', { 'data-col': 'kind' }, e.kind),
      h('td', { 'data-col': 'attempt', class: 'num' }, e.attempt + ' / ' + e.max_attempts),
      h('td', { 'data-col': 'reason' }, e.reason),
      h('td', { 'data-col': 'dlq_at' }, awa.fmtTime(e.dlq_at)),
      h('td', { 'data-col': 'error' }, h('pre', null, last)));
  }

  awa.pages.dlq = {
    mount(main) {
      const q = (this.q = awa.query());
      const sel = (this.selection = new awa.Selection());
      this.queuesFilled = false;
      const selected = (verb, path) => async () => {
        const ids = sel.list();
        if (!ids.length) return 'select dead letters first';
        return awa.each(ids, verb, (id) => awa.post('/api/dlq/' + path, { id: id }));
      };
      const matching = (verb, path) => async () => {
        const body = { queue: q.queue, kind: q.kind };
        if (!q.queue && !q.kind) {
          if (!window.confirm(verb + ' ALL dead letters of every queue?')) return 'nothing done';
          body.all = true;
        }
        const r = await awa.post('/api/dlq/' + path, body);
        return path === 'retry' ? 'retried ' + r.retried.length : 'purged ' + r.purged;
      };
      const scope = q.queue || q.kind ? 'matching' : 'all';
      main.append(
        h('h1', null, 'Dead letters ', h('span', { class: 'muted' },
          '(', h('span', { id: 'dlq-count' }, '0'), ' shown)')),
        filters(q),
        h('div', { class: 'actions' },
          awa.action('retry-selected', 'Retry selected', selected('retried', 'retry')),
          awa.action('purge-selected', 'Purge selected', selected('purged', 'purge'), 'danger'),
          awa.action('retry-matching', 'Retry ' + scope, matching('Retry', 'retry')),
          awa.action('purge-matching', 'Purge ' + scope, matching('Purge', 'purge'), 'danger')),
        awa.table('dlq', [['id', 'ID'], ['queue', 'Queue'], ['kind', 'Kind'],
          ['attempt', 'Attempts'], ['reason', 'Reason'], ['dlq_at', 'Dead-lettered (UTC)'],
          ['error', 'Last error']], { select: !awa.info.read_only }),
        h('p', { id: 'no-dlq', class: 'muted', hidden: true }, 'No dead letter matches.'));
    },

    async refresh() {
      const q = this.q;
      const calls = [awa.api(awa.url('/api/dlq', { queue: q.queue, kind: q.kind, limit: LIMIT }))];
      if (!this.queuesFilled) calls.push(awa.api('/api/queues'));
      const [entries, queues] = await Promise.all(calls);
      if (queues) {
        awa.fillQueues(queues, q.queue);
        this.queuesFilled = true;
      }
      this.selection.keep(entries.map((e) => e.id));
      awa.fill(document.querySelector('#dlq tbody'), entries.map((e) => row(e, this.selection)));
      awa.fill('dlq-count', String(entries.length));
      document.getElementById('no-dlq').hidden = entries.length > 0;
    },
  };
})(window.awa);
