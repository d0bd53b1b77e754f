// Queue: settings, counts, and per (priority, enqueue_shard) lane its cursors, lag and
// available rows, with a bar per shard and claims per shard per minute (a starved shard
// shows as lag that grows while its claims stop: docs/design/engine.md, "Watching the
// shards").
'use strict';

(function (awa) {
  const h = awa.h;
  const WINDOW = 15;  // minutes of claims shown
  const QUIET = 5;    // minutes without claims that make a lagging shard starved

  function median(xs) {
    const s = [...xs].sort((a, b) => a - b);
    if (!s.length) return 0;
    const m = Math.floor(s.length / 2);
    return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
  }

  // Per shard: lag and available summed over priorities, claims per minute, starved.
  function shardsOf(data) {
    const byShard = new Map();
    const get = (s) => {
      if (!byShard.has(s)) {
        byShard.set(s, { shard: s, lag: 0, available: 0, claims: new Array(data.minutes).fill(0) });
      }
      return byShard.get(s);
    };
    for (const sc of data.shard_claims) get(sc.enqueue_shard).claims = sc.claims;
    for (const l of data.lanes) {
      const s = get(l.enqueue_shard);
      s.lag += l.lag;
      s.available += l.available;
    }
    const shards = [...byShard.values()].sort((a, b) => a.shard - b.shard);
    const med = median(shards.map((s) => s.lag));
    const recent = (s) => awa.sum(s.claims.slice(-QUIET));
    const anyRecent = shards.some((s) => recent(s) > 0);
    for (const s of shards) {
      s.starved = s.lag > 0 &&
        ((anyRecent && recent(s) === 0) || (s.lag >= 4 * med && s.lag >= 10));
    }
    return shards;
  }

  function shardBars(shards) {
    const maxLag = Math.max(1, ...shards.map((s) => s.lag));
    return shards.map((s) => {
      const fill = h('div', { class: 'fill' });
      fill.style.width = ((s.lag / maxLag) * 100).toFixed(1) + '%';
      return h('div', { class: 'shard-bar' + (s.starved ? ' starved' : ''),
        'data-shard': s.shard, 'data-lag': s.lag, 'data-available': s.available },
        h('span', { class: 'label' }, 'shard ' + s.shard),
        h('div', { class: 'track' }, fill),
        h('span', { class: 'value' }, 'lag ' + s.lag + ' · available ' + s.available +
          (s.starved ? ' · starved' : '')));
    });
  }

  function laneRow(l, starvedShards) {
    const starved = l.lag > 0 && starvedShards.has(l.enqueue_shard);
    return h('tr', { 'data-priority': l.priority, 'data-shard': l.enqueue_shard,
      class: starved ? 'starved' : null },
      h('td', { 'data-col': 'priority', class: 'num' }, String(l.priority)),
      h('td', { 'data-col': 'enqueue_shard', class: 'num' }, String(l.enqueue_shard)),
      ['enqueue_cursor', 'claim_cursor', 'lag', 'available'].map((k) =>
        h('td', { 'data-col': k, class: 'num' }, String(l[k]))),
      h('td', { 'data-col': 'claims', class: 'num' }, String(awa.sum(l.claims))));
  }

  function setting(name, label, value) {
    return [h('dt', null, label), h('dd', { 'data-setting': name }, value)];
  }

  awa.pages.queue = {
    mount(main) {
      const q = this.arg;
      main.append(
        h('div', { class: 'title' }, h('span', { class: 'muted' }, 'Queue'),
          h('h1', { id: 'queue-name' }, q), h('span', { id: 'queue-state', class: 'badge' }, '')),
        h('div', { id: 'queue-actions', class: 'actions' }),
        h('dl', { id: 'settings' }),
        awa.table('counts', awa.STATES.map((s) => [s, s])),
        h('h2', null, 'Shards: lag (enqueue cursor − claim cursor) and available rows'),
        h('div', { id: 'shard-bars' }),
        h('h2', null, 'Claims per shard per minute, last ' + WINDOW + ' minutes'),
        h('div', { id: 'claims' }),
        h('h2', null, 'Lanes'),
        awa.table('lanes', [['priority', 'Priority'], ['enqueue_shard', 'Shard'],
          ['enqueue_cursor', 'Enqueue cursor'], ['claim_cursor', 'Claim cursor'], ['lag', 'Lag'],
          ['available', 'Available'], ['claims', 'Claims (' + WINDOW + ' min)']]),
        h('p', null, h('a', { href: awa.url('/jobs', { queue: q }) }, 'Jobs of this queue'), ' · ',
          h('a', { href: awa.url('/dlq', { queue: q }) }, 'Dead letters of this queue')));
    },

    async refresh() {
      const name = encodeURIComponent(this.arg);
      const [q, data] = await Promise.all([
        awa.api('/api/queues/' + name),
        awa.api('/api/queues/' + name + '/shards?minutes=' + WINDOW),
      ]);
      awa.fill('queue-state', q.paused ? 'paused' : 'active');
      document.getElementById('queue-state').classList.toggle('paused', q.paused);
      awa.fill('queue-actions', q.paused
        ? awa.action('resume', 'Resume', async () => {
          await awa.post('/api/queues/' + name + '/resume');
          return 'resumed ' + q.queue;
        })
        : awa.action('pause', 'Pause', async () => {
          await awa.post('/api/queues/' + name + '/pause');
          return 'paused ' + q.queue;
        }));
      const s = q.settings;
      awa.fill('settings',
        setting('enqueue_shards', 'Enqueue shards', String(s.enqueue_shards)),
        setting('dlq_enabled', 'Dead-letter queue', s.dlq_enabled ? 'on' : 'off'),
        setting('priority_aging_ms', 'Priority aging', s.priority_aging_ms === null
          ? "worker's" : s.priority_aging_ms + ' ms'),
        setting('deadline_ms', 'Attempt deadline', s.deadline_ms === null
          ? "worker's" : s.deadline_ms + ' ms'),
        setting('max_workers_hint', 'Max workers (hint)', awa.orDash(s.max_workers_hint)),
        setting('oldest_available', 'Oldest available', awa.fmtAge(q.oldest_available_age_s)));
      awa.fill(document.querySelector('#counts tbody'), h('tr', null,
        awa.STATES.map((st) => h('td', { 'data-col': st, class: 'num' }, String(q[st])))));

      const shards = shardsOf(data);
      const starved = new Set(shards.filter((x) => x.starved).map((x) => x.shard));
      awa.fill('shard-bars', shardBars(shards));
      const series = shards.map((x) => ({ label: 'shard ' + x.shard, cls: awa.shardClass(x.shard),
        attrs: { 'data-shard': x.shard }, values: x.claims }));
      awa.fill('claims', awa.stackedBars('claims-chart', data.start, series,
        'Claims per shard per minute'), awa.legend(series));
      awa.fill(document.querySelector('#lanes tbody'), data.lanes.map((l) => laneRow(l, starved)));
    },
  };
})(window.awa);
