// Batch: its counts and progress, its completion job (a link once it exists) and its
// members, a page of 100 at a time by id, each linking to its job.
'use strict';

(function (awa) {
  const h = awa.h;
  const PAGE = 100;

  function field(id, label) {
    return [h('dt', null, label), h('dd', null, h('span', { id: id }, '—'))];
  }

  function completion(b) {
    if (b.completion_job !== null) return awa.jobLink(b.completion_job);
    if (b.on_complete === null) return 'none (the batch only counts)';
    return 'none yet';
  }

  function memberRow(m) {
    return h('tr', { 'data-job-id': m.id },
      h('td', { 'data-col': 'id', class: 'num' }, h('a', { href: '/jobs/' + m.id }, String(m.id))),
      h('td', { 'data-col': 'state' }, h('span', { class: 'state ' + m.state }, m.state)));
  }

  awa.pages.batch = {
    mount(main) {
      this.q = awa.query();
      document.title = 'awa · batch ' + this.arg;
      main.append(
        h('h1', { class: 'title' }, 'Batch ', h('span', { id: 'batch-name' }, this.arg), ' ',
          h('span', { id: 'batch-state', class: 'badge' }, '')),
        h('div', { id: 'batch-bar-wrap', class: 'progress-wide' }),
        h('p', { id: 'batch-progress' }),
        h('dl', { class: 'fields' }, field('batch-members', 'Members'),
          field('batch-completed', 'Completed'), field('batch-failed', 'Failed (or dead-lettered)'),
          field('batch-cancelled', 'Cancelled'), field('batch-pending', 'Pending'),
          field('batch-completion', 'Completion job'), field('batch-on-complete', 'On complete'),
          field('batch-queue', 'Completion queue'), field('batch-created', 'Created (UTC)'),
          field('batch-sealed', 'Sealed (UTC)'), field('batch-finished', 'Finished (UTC)')),
        h('h2', null, 'Members'),
        awa.table('members', [['id', 'Job'], ['state', 'State']]),
        h('p', { id: 'no-members', class: 'muted', hidden: true }, 'No member yet.'),
        h('nav', { class: 'pager', id: 'pager' }));
    },

    async refresh() {
      const name = encodeURIComponent(this.arg);
      const q = this.q;
      let b;
      try {
        b = await awa.api(awa.url('/api/batches/' + name, { members: PAGE, after: q.after }));
      } catch (e) {
        // A batch that is gone (or a bad name) will not come back: stop refreshing.
        if (e.status === 404 || e.status === 400) this.refreshes = false;
        throw e;
      }
      const state = awa.batchState(b);
      const badge = document.getElementById('batch-state');
      badge.textContent = state;
      badge.className = 'badge ' + state;
      awa.fill('batch-bar-wrap', awa.batchBar(b, 'batch-bar'));
      awa.fill('batch-progress', awa.batchProgressText(b) +
        (b.sealed ? '' : ' · open: members may still join'));
      awa.fill('batch-members', b.members + (b.sealed ? '' : ' (so far)'));
      awa.fill('batch-completed', String(b.completed));
      awa.fill('batch-failed', String(b.failed));
      awa.fill('batch-cancelled', String(b.cancelled));
      awa.fill('batch-pending', String(b.pending));
      awa.fill('batch-completion', completion(b));
      awa.fill('batch-on-complete', awa.orDash(b.on_complete));
      awa.fill('batch-queue', h('a', { href: '/queues/' + encodeURIComponent(b.queue) }, b.queue));
      awa.fill('batch-created', awa.fmtTime(b.created_at));
      awa.fill('batch-sealed', awa.fmtTime(b.sealed_at));
      awa.fill('batch-finished', awa.fmtTime(b.finished_at));
      awa.fill(document.querySelector('#members tbody'), b.member_jobs.map(memberRow));
      document.getElementById('no-members').hidden = b.member_jobs.length > 0 || !!q.after;
      const base = '/batches/' + name;
      awa.fill('pager',
        q.after ? h('a', { id: 'first-page', href: base }, '« first') : null,
        b.next_after !== null ? h('a', { id: 'next-page',
          href: awa.url(base, { after: b.next_after }) }, 'next »') : null);
    },
  };
})(window.awa);
