// Jobs: filtered by queue, state and kind (in the URL), a page of 50 at a time by id,
// several selected at once for retry or cancel.
'use strict';

(function (awa) {
  const h = awa.h;
  const PAGE = 50;

  // The filter form, built once; its queue options are filled from /api/queues.
  function filters(q) {
    const stateSelect = h('select', { name: 'state' }, h('option', { value: '' }, 'any state'),
      awa.JOB_STATES.map((s) => h('option', { value: s, selected: q.state === s }, s)));
    const queueSelect = awa.queueSelect(q.queue);
    return h('form', {
      id: 'filters', class: 'filters',
      onsubmit: (ev) => {
        ev.preventDefault();
        const f = new FormData(ev.target);
        location.assign(awa.url('/jobs', { queue: f.get('queue'), state: f.get('state'),
          kind: f.get('kind') }));
      },
    }, h('label', null, 'Queue ', queueSelect), h('label', null, 'State ', stateSelect),
    h('label', null, 'Kind ', h('input', { name: 'kind', value: q.kind || '', size: 16 })),
    h('button', { type: 'submit' }, 'Filter'));
  }

  function jobRow(j, selection) {
    return h('tr', { 'data-job-id': j.id },
      h('td', null, selection.box(j.id)),
      h('td', { 'data-col': 'id', class: 'num' }, h('a', { href: '/jobs/' + j.id }, String(j.id))),
      h('td', { 'data-col': 'queue' }, j.queue),
      h('td', { 'data-col': 'kind' }, j.kind),
      h('td', { 'data-col': 'state' }, h('span', { class: 'state ' + j.state }, j.state)),
      h('td', { 'data-col': 'priority', class: 'num' }, String(j.priority)),
      h('td', { 'data-col': 'attempt', class: 'num' }, j.attempt + ' / ' + j.max_attempts),
      h('td', { 'data-col': 'enqueue_shard', class: 'num' }, awa.orDash(j.enqueue_shard)),
      h('td', { 'data-col': 'run_at' }, awa.fmtTime(j.run_at)));
  }

  awa.pages.jobs = {
    mount(main) {
      this.q = awa.query();
      this.selection = new awa.Selection();
      this.queuesFilled = false;
      const sel = this.selection;
      const bulk = (verb, path) => async () => {
        const ids = sel.list();
        if (!ids.length) return 'select jobs first';
        return awa.each(ids, verb, (id) => awa.post('/api/jobs/' + id + '/' + path));
      };
      main.append(
        h('h1', null, 'Jobs'),
        filters(this.q),
        h('div', { class: 'actions' },
          awa.action('bulk-retry', 'Retry selected', bulk('retried', 'retry')),
          awa.action('bulk-cancel', 'Cancel selected', bulk('cancelled', 'cancel'))),
        awa.table('jobs', [['id', 'ID'], ['queue', 'Queue'], ['kind', 'Kind'], ['state', 'State'],
          ['priority', 'Priority'], ['attempt', 'Attempt'], ['enqueue_shard', 'Shard'],
          ['run_at', 'Run at / dead-lettered (UTC)']], { select: !awa.info.read_only }),
        h('p', { id: 'no-jobs', class: 'muted', hidden: true }, 'No job matches.'),
        h('nav', { class: 'pager', id: 'pager' }));
    },

    async refresh() {
      const q = this.q;
      const params = { queue: q.queue, state: q.state, kind: q.kind, after: q.after, limit: PAGE };
      const calls = [awa.api(awa.url('/api/jobs', params))];
      if (!this.queuesFilled) calls.push(awa.api('/api/queues'));
      const [page, queues] = await Promise.all(calls);
      if (queues) {
        awa.fillQueues(queues, q.queue);
        this.queuesFilled = true;
      }
      this.selection.keep(page.jobs.map((j) => j.id));
      const rows = page.jobs.map((j) => {
        const row = jobRow(j, this.selection);
        if (awa.info.read_only) row.firstChild.remove();
        return row;
      });
      awa.fill(document.querySelector('#jobs tbody'), rows);
      document.getElementById('no-jobs').hidden = page.jobs.length > 0;
      const base = { queue: q.queue, state: q.state, kind: q.kind };
      awa.fill('pager',
        q.after ? h('a', { id: 'first-page', href: awa.url('/jobs', base) }, '« first') : null,
        page.next_after !== null ? h('a', { id: 'next-page',
          href: awa.url('/jobs', Object.assign({ after: page.next_after }, base)) }, 'next »')
          : null);
    },
  };
})(window.awa);
