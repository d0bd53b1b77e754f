// Job: its arguments and metadata, its parents and children, attempts with their errors,
// progress, the timeline, and cancel / retry where the job's state allows them.
'use strict';

(function (awa) {
  const h = awa.h;
  const CANCELLABLE = ['waiting', 'scheduled', 'retryable', 'available', 'running',
    'waiting_external'];
  const RETRYABLE = ['failed', 'cancelled', 'dlq'];

  const pretty = (v) => JSON.stringify(v, null, 2);

  function field(id, label) {
    return [h('dt', null, label), h('dd', null, h('span', { id: id }, '—'))];
  }

  // Parents or children: each a link to its job, with its state.
  function links(list) {
    return list.map((l) => h('li', { 'data-job': l.id },
      h('a', { href: '/jobs/' + l.id }, 'job ' + l.id), ' ',
      h('span', { class: 'state ' + l.state }, l.state)));
  }

  function timelineItem(e) {
    const where = e.enqueue_shard === null ? '' : ' · shard ' + e.enqueue_shard;
    const attempt = e.attempt ? ' · attempt ' + e.attempt : '';
    return h('li', { 'data-event': e.event },
      h('span', { class: 'at' }, awa.fmtTime(e.at)), ' ',
      h('strong', null, e.event), attempt + where,
      e.detail ? h('div', { class: 'detail' }, e.detail) : null);
  }

  awa.pages.job = {
    mount(main) {
      const id = this.arg;
      document.title = 'awa · job ' + id;
      main.append(
        h('h1', null, 'Job ', h('span', { id: 'job-id' }, id), ' ',
          h('span', { id: 'job-state', class: 'state' }, '')),
        h('div', { id: 'job-actions', class: 'actions' }),
        h('dl', { class: 'fields' }, field('job-queue', 'Queue'), field('job-kind', 'Kind'),
          field('job-priority', 'Priority'), field('job-attempt', 'Attempt'),
          field('job-shard', 'Shard / lane_seq'), field('job-created', 'Created (UTC)'),
          field('job-run-at', 'Run at (UTC)'), field('job-tags', 'Tags'),
          field('job-ordering-key', 'Ordering key'), field('job-callback', 'Callback id')),
        h('h2', null, 'Arguments'), h('pre', { id: 'job-args' }),
        h('h2', null, 'Metadata'), h('pre', { id: 'job-metadata' }),
        h('div', { id: 'progress-section', hidden: true },
          h('h2', null, 'Progress'), h('pre', { id: 'job-progress' })),
        h('div', { id: 'result-section', hidden: true },
          h('h2', null, 'Result'), h('pre', { id: 'job-result' })),
        h('div', { id: 'parents-section', hidden: true },
          h('h2', null, 'Runs after'), h('p', { id: 'job-policy', class: 'muted' }),
          h('ul', { id: 'job-parents' })),
        h('div', { id: 'children-section', hidden: true },
          h('h2', null, 'Then runs'), h('ul', { id: 'job-children' })),
        h('h2', null, 'Errors'),
        awa.table('errors', [['attempt', 'Attempt'], ['at', 'At (UTC)'], ['error', 'Error']]),
        h('p', { id: 'no-errors', class: 'muted', hidden: true }, 'No attempt failed.'),
        h('h2', null, 'Timeline'), h('ol', { id: 'timeline' }));
    },

    async refresh() {
      const id = encodeURIComponent(this.arg);
      let j;
      try {
        j = await awa.api('/api/jobs/' + id);
      } catch (e) {
        // A job that is gone (or a bad id) will not come back: stop refreshing.
        if (e.status === 404 || e.status === 400) this.refreshes = false;
        throw e;
      }
      const state = document.getElementById('job-state');
      state.textContent = j.state;
      state.className = 'state ' + j.state;
      awa.fill('job-queue', h('a', { href: '/queues/' + encodeURIComponent(j.queue) }, j.queue));
      awa.fill('job-kind', j.kind);
      awa.fill('job-priority', String(j.priority));
      awa.fill('job-attempt', j.attempt + ' / ' + j.max_attempts);
      awa.fill('job-shard', awa.orDash(j.enqueue_shard) + ' / ' + awa.orDash(j.lane_seq));
      awa.fill('job-created', awa.fmtTime(j.created_at));
      awa.fill('job-run-at', awa.fmtTime(j.run_at));
      awa.fill('job-tags', j.tags.length ? j.tags.join(', ') : '—');
      awa.fill('job-ordering-key', awa.orDash(j.ordering_key));
      awa.fill('job-callback', awa.orDash(j.callback_id));
      awa.fill('job-args', pretty(j.args));
      awa.fill('job-metadata', pretty(j.metadata));
      document.getElementById('progress-section').hidden = j.progress === null;
      awa.fill('job-progress', j.progress === null ? '' : pretty(j.progress));
      document.getElementById('result-section').hidden = j.result === null;
      awa.fill('job-result', j.result === null ? '' : pretty(j.result));
      document.getElementById('parents-section').hidden = j.parents.length === 0;
      awa.fill('job-parents', links(j.parents));
      awa.fill('job-policy', j.parents.length === 0 ? '' :
        'If a parent fails or is cancelled: ' + j.on_parent_failure +
        (j.pending_parents === null ? '' : ' · waiting for ' + j.pending_parents));
      document.getElementById('children-section').hidden = j.children.length === 0;
      awa.fill('job-children', links(j.children));
      awa.fill(document.querySelector('#errors tbody'), j.errors.map((e) =>
        h('tr', { 'data-attempt': e.attempt },
          h('td', { 'data-col': 'attempt', class: 'num' }, String(e.attempt)),
          h('td', { 'data-col': 'at' }, awa.fmtTime(e.at)),
          h('td', { 'data-col': 'error' }, h('pre', null, e.error)))));
      document.getElementById('no-errors').hidden = j.errors.length > 0;
      awa.fill('timeline', j.timeline.map(timelineItem));
      awa.fill('job-actions',
        CANCELLABLE.includes(j.state) ? awa.action('cancel', 'Cancel', async () => {
          const r = await awa.post('/api/jobs/' + id + '/cancel');
          return 'job ' + r.id + ' cancelled (was ' + r.state + ')';
        }) : null,
        RETRYABLE.includes(j.state) ? awa.action('retry', 'Retry', async () => {
          const r = await awa.post('/api/jobs/' + id + '/retry');
          return 'job ' + r.id + ' retried (was ' + r.state + ')';
        }) : null);
    },
  };
})(window.awa);
