// Storage: the rings of `awa storage status` — the current slot and generation, rows per
// slot, the last rotation and prune, and why the latest attempt at either did nothing.
'use strict';

(function (awa) {
  const h = awa.h;

  function eventText(e, withRows) {
    if (!e) return '—';
    if (e.reason !== undefined) return awa.fmtTime(e.at) + ': ' + e.reason;
    let text = awa.fmtTime(e.at) + ' · generation ' + e.generation + ' · slot ' + e.slot;
    if (withRows) text += ' · ' + e.rows_removed + ' rows removed, ' + e.rows_carried + ' carried';
    return text;
  }

  function ring(r) {
    const field = (name, text) => h('span', { 'data-field': name }, text);
    return h('section', { class: 'ring', 'data-ring': r.ring },
      h('h2', null, 'Ring ', r.ring),
      h('p', null, 'current slot ', field('current_slot', String(r.current_slot)),
        ' · generation ', field('generation', String(r.generation))),
      h('table', null,
        h('thead', null, h('tr', null, h('th', null, 'Slot'), h('th', null, 'State'),
          h('th', null, 'Generation'), h('th', null, 'Rows'))),
        h('tbody', null, r.slots.map((s) => h('tr', { 'data-slot': s.slot,
          class: s.state === 'current' ? 'current' : null },
        h('td', { 'data-col': 'slot', class: 'num' }, String(s.slot)),
        h('td', { 'data-col': 'state' }, s.state),
        h('td', { 'data-col': 'generation', class: 'num' }, String(s.generation)),
        h('td', { 'data-col': 'rows', class: 'num' }, String(s.rows)))))),
      h('dl', null,
        h('dt', null, 'Last rotation'), h('dd', null, field('last_rotation',
          eventText(r.last_rotation, false))),
        h('dt', null, 'Last prune'), h('dd', null, field('last_prune', eventText(r.last_prune, true))),
        h('dt', null, 'Rotation skipped'), h('dd', null, field('last_rotate_skip',
          eventText(r.rotate_skipped, false))),
        h('dt', null, 'Prune skipped'), h('dd', null, field('last_prune_skip',
          eventText(r.prune_skipped, false)))));
  }

  awa.pages.storage = {
    mount(main) {
      main.append(h('h1', null, 'Storage rings'), h('div', { id: 'rings' }));
    },
    async refresh() {
      const s = await awa.api('/api/storage');
      awa.fill('rings', s.rings.map(ring));
    },
  };
})(window.awa);
