// Batches: the newest first (all, or only those not finished, from the URL), each with its
// progress: how many of its members have ended, and how. Also the batch pieces the batch
// page shares: its state word and its progress bar.
'use strict';

(function (awa) {
  const h = awa.h;
  const LIMIT = 100;
  const ENDS = ['completed', 'failed', 'cancelled'];

  // "open" (members may still join), "sealed" (no member joins, some have not ended) or
  // "finished" (sealed and every member ended).
  awa.batchState = (b) => (b.finished ? 'finished' : b.sealed ? 'sealed' : 'open');
  awa.batchEnded = (b) => b.completed + b.failed + b.cancelled;

  // A bar of the members: one segment per way of ending, as a share of all members; the
  // rest of the track is the members that have not ended. `id`: the element's id, if any.
  awa.batchBar = function (b, id) {
    const ended = awa.batchEnded(b);
    const bar = h('div', {
      id: id || null, class: 'progress', role: 'img', 'data-members': b.members,
      'data-ended': ended,
      'aria-label': ended + ' of ' + b.members + ' ended: ' +
        ENDS.map((k) => b[k] + ' ' + k).join(', '),
    });
    for (const k of ENDS) {
      const seg = h('span', { class: 'seg ' + k, 'data-seg': k, 'data-count': b[k],
        title: b[k] + ' ' + k });
      seg.style.width = (b.members > 0 ? (b[k] / b.members) * 100 : 0).toFixed(2) + '%';
      bar.append(seg);
    }
    return bar;
  };
  // "7/10 ended (5 completed, 1 failed, 1 cancelled)", as `awa batch show` prints it.
  awa.batchProgressText = (b) => awa.batchEnded(b) + '/' + b.members + ' ended (' +
    ENDS.map((k) => b[k] + ' ' + k).join(', ') + ')';

  awa.jobLink = (id) => h('a', { href: '/jobs/' + id }, 'job ' + id);

  function batchRow(b) {
    const state = awa.batchState(b);
    return h('tr', { 'data-batch': b.name, class: state },
      h('td', { 'data-col': 'name' },
        h('a', { href: '/batches/' + encodeURIComponent(b.name) }, b.name)),
      h('td', { 'data-col': 'state' }, h('span', { class: 'badge ' + state }, state)),
      h('td', { 'data-col': 'progress' }, h('div', { class: 'progress-cell' }, awa.batchBar(b),
        h('span', { class: 'progress-label' }, awa.batchEnded(b) + '/' + b.members))),
      ENDS.concat(['pending']).map((k) => h('td', { 'data-col': k, class: 'num' }, String(b[k]))),
      h('td', { 'data-col': 'completion_job' },
        b.completion_job === null ? '—' : awa.jobLink(b.completion_job)),
      h('td', { 'data-col': 'on_complete' }, awa.orDash(b.on_complete)),
      h('td', { 'data-col': 'created_at' }, awa.fmtTime(b.created_at)));
  }

  awa.pages.batches = {
    mount(main) {
      this.q = awa.query();
      const openOnly = this.q.open === '1';
      document.title = 'awa · batches';
      main.append(
        h('h1', null, 'Batches'),
        h('form', { id: 'filters', class: 'filters' },
          h('label', null, h('input', {
            type: 'checkbox', name: 'open', checked: openOnly,
            onchange: (ev) => location.assign(awa.url('/batches',
              { open: ev.target.checked ? '1' : '' })),
          }), ' only batches not finished')),
        awa.table('batches', [['name', 'Batch'], ['state', 'State'], ['progress', 'Ended'],
          ['completed', 'Completed'], ['failed', 'Failed'], ['cancelled', 'Cancelled'],
          ['pending', 'Pending'], ['completion_job', 'Completion job'],
          ['on_complete', 'On complete'], ['created_at', 'Created (UTC)']]),
        h('p', { id: 'no-batches', class: 'muted', hidden: true },
          openOnly ? 'No batch is open or waiting for its members.' : 'No batch yet.'),
        h('p', { id: 'batches-limit', class: 'muted', hidden: true },
          'The newest ' + LIMIT + ' only.'));
    },

    async refresh() {
      const batches = await awa.api(awa.url('/api/batches',
        { open: this.q.open === '1' ? '1' : '', limit: LIMIT }));
      awa.fill(document.querySelector('#batches tbody'), batches.map(batchRow));
      document.getElementById('no-batches').hidden = batches.length > 0;
      document.getElementById('batches-limit').hidden = batches.length < LIMIT;
    },
  };
})(window.awa);
