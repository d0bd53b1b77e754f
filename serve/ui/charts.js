// Per-minute bar charts as SVG, drawn here rather than with a charting library: the
// dashboard needs stacked bars and a legend, nothing a 200 KB dependency would add.
'use strict';

(function (awa) {
  const h = awa.h;
  const W = 720;
  const H = 160;
  const PAD_LEFT = 40;
  const PAD_BOTTOM = 18;

  // series: [{label, cls, attrs: {...}, values: [n per minute]}], stacked per minute.
  // start: ISO time of minute 0. Each bar is rect[data-minute][data-value] plus attrs.
  awa.stackedBars = function (id, start, series, title) {
    const minutes = series.length ? series[0].values.length : 0;
    const totals = [];
    for (let i = 0; i < minutes; i += 1) totals.push(awa.sum(series.map((s) => s.values[i])));
    const max = Math.max(1, ...totals);
    const plotW = W - PAD_LEFT;
    const plotH = H - PAD_BOTTOM;
    const step = minutes ? plotW / minutes : plotW;
    const barW = Math.max(1, step * 0.8);
    const svg = h('svg:svg', { id: id, viewBox: '0 0 ' + W + ' ' + H, role: 'img',
      'aria-label': title, preserveAspectRatio: 'none', class: 'chart' });
    svg.append(h('svg:title', null, title));
    svg.append(h('svg:line', { x1: PAD_LEFT, y1: plotH, x2: W, y2: plotH, class: 'axis' }));
    svg.append(h('svg:text', { x: PAD_LEFT - 4, y: 10, class: 'tick', 'text-anchor': 'end' },
      String(max)));
    svg.append(h('svg:text', { x: PAD_LEFT - 4, y: plotH, class: 'tick', 'text-anchor': 'end' },
      '0'));
    if (start && minutes) {
      const t0 = new Date(start);
      const label = (d) => d.toISOString().slice(11, 16);
      svg.append(h('svg:text', { x: PAD_LEFT, y: H - 4, class: 'tick' }, label(t0)));
      const tEnd = new Date(t0.getTime() + (minutes - 1) * 60000);
      svg.append(h('svg:text', { x: W, y: H - 4, class: 'tick', 'text-anchor': 'end' },
        label(tEnd) + ' UTC'));
    }
    for (let i = 0; i < minutes; i += 1) {
      let y = plotH;
      for (const s of series) {
        const v = s.values[i];
        const bh = (v / max) * (plotH - 4);
        y -= bh;
        const rect = h('svg:rect', Object.assign({
          x: (PAD_LEFT + i * step).toFixed(2), y: y.toFixed(2), width: barW.toFixed(2),
          height: bh.toFixed(2), class: s.cls, 'data-minute': i, 'data-value': v,
        }, s.attrs));
        rect.append(h('svg:title', null, s.label + ': ' + v));
        svg.append(rect);
      }
    }
    return svg;
  };

  awa.legend = function (series) {
    return h('ul', { class: 'legend' }, series.map((s) =>
      h('li', null, h('span', { class: 'swatch ' + s.cls }), s.label + ' ' + awa.sum(s.values))));
  };

  // Distinct colours for up to 8 shards, then they repeat (the legend names each).
  awa.shardClass = (shard) => 'shard-c' + (shard % 8);
})(window.awa);
