// Overview: every queue with its counts, completed / failed per minute over the last
// hour, and the workers and leader seen recently.
'use strict';

(function (awa) {
  const h = awa.h;

  const COLUMNS = [['queue', 'Queue'], ['paused', 'State']]
    .concat(awa.STATES.map((s) => [s, s]))
    .concat([['oldest_available_age_s', 'Oldest available']]);

  function queueRow(q) {
    return h('tr', { 'data-queue': q.queue, class: q.paused ? 'paused' : null },
      h('td', { 'data-col': 'queue' }, h('a', { href: '/queues/' + encodeURIComponent(q.queue) },
        q.queue)),
      h('td', { 'data-col': 'paused' }, q.paused ? 'paused' : 'active'),
      awa.STATES.map((s) => h('td', { 'data-col': s, class: 'num' }, String(q[s]))),
      h('td', { 'data-col': 'oldest_available_age_s', class: 'num' },
        awa.fmtAge(q.oldest_available_age_s)));
  }

  function workerRow(w) {
    return h('tr', { 'data-instance': w.instance_id },
      h('td', { 'data-col': 'hostname' }, w.hostname),
      h('td', { 'data-col': 'pid', class: 'num' }, String(w.pid)),
      h('td', { 'data-col': 'queues' }, w.queues.join(', ')),
      h('td', { 'data-col': 'last_seen_at' }, awa.fmtTime(w.last_seen_at)),
      h('td', { 'data-col': 'leader' }, w.is_leader ? 'leader' : ''));
  }

  awa.pages.overview = {
    mount(main) {
      main.append(
        h('h1', null, 'Queues'),
        awa.table('queues', COLUMNS),
        h('p', { id: 'no-queues', class: 'muted', hidden: true }, 'No queue has been used yet.'),
        h('h2', null, 'Finished per minute, last hour'),
        h('p', null, 'completed ', h('span', { id: 'throughput-completed' }, '0'),
          ' · failed ', h('span', { id: 'throughput-failed' }, '0')),
        h('div', { id: 'throughput' }),
        h('h2', null, 'Workers'),
        h('p', null, 'Maintenance leader: ', h('span', { id: 'leader' }, '—'),
          h('span', { id: 'leader-age', class: 'muted' })),
        awa.table('workers', [['hostname', 'Host'], ['pid', 'PID'], ['queues', 'Queues'],
          ['last_seen_at', 'Last seen (UTC)'], ['leader', '']]),
        h('p', { id: 'no-workers', class: 'muted', hidden: true },
          'No worker process seen in the last 30 s.'));
    },

    async refresh() {
      const [queues, rates, health] = await Promise.all([
        awa.api('/api/queues'),
        awa.api('/api/throughput?minutes=60'),
        awa.api('/api/health', { accept: [503] }),
      ]);
      awa.fill(document.querySelector('#queues tbody'), queues.map(queueRow));
      document.getElementById('no-queues').hidden = queues.length > 0;

      const completed = new Array(rates.minutes).fill(0);
      const failed = new Array(rates.minutes).fill(0);
      for (const q of rates.queues) {
        q.completed.forEach((v, i) => { completed[i] += v; });
        q.failed.forEach((v, i) => { failed[i] += v; });
      }
      const series = [
        { label: 'completed', cls: 'series-completed', attrs: { 'data-series': 'completed' },
          values: completed },
        { label: 'failed', cls: 'series-failed', attrs: { 'data-series': 'failed' }, values: failed },
      ];
      awa.fill('throughput-completed', String(awa.sum(completed)));
      awa.fill('throughput-failed', String(awa.sum(failed)));
      awa.fill('throughput',
        awa.stackedBars('throughput-chart', rates.start, series, 'Jobs finished per minute'),
        awa.legend(series));

      awa.fill('leader', health.leader_present ? 'present' : 'absent');
      awa.fill('leader-age', health.leader_tick_age_s === null ? ''
        : ' (last tick ' + awa.fmtAge(health.leader_tick_age_s) + ' ago)');
      awa.fill(document.querySelector('#workers tbody'), health.workers.map(workerRow));
      document.getElementById('no-workers').hidden = health.workers.length > 0;
    },
  };
})(window.awa);
