// Installed in every test page (context.add_init_script) as window.__woml.
// Reads a notebook through the app the front end exposes as window.jupyterapp and
// measures the timeline's DOM as the browser rendered it (spec §6.3).
(() => {
  if (window.__woml) return;

  // --- the notebook --------------------------------------------------------------
  function panel(path) {
    const app = window.jupyterapp;
    if (!app || !app.shell) return null;
    const isPanel = (w) => w && w.context && w.context.path === path && w.content
      && w.content.widgets && w.sessionContext;
    try {
      for (const w of app.shell.widgets('main')) if (isPanel(w)) return w;
    } catch (e) { /* an app without that area */ }
    return isPanel(app.shell.currentWidget) ? app.shell.currentWidget : null;
  }

  function kernelStatus(path) {
    const p = panel(path);
    if (!p) return 'no panel';
    if (!p.context.isReady) return 'loading';
    const session = p.sessionContext.session;
    const kernel = session && session.kernel;
    return kernel ? kernel.status : 'no kernel';
  }

  const commandErrors = [];

  function runAll(path) {
    const app = window.jupyterapp;
    const p = panel(path);
    if (!p) throw new Error(`no notebook panel for ${path}`);
    app.shell.activateById(p.id);
    // Not awaited: a wedged kernel never resolves it; the test polls the cells.
    app.commands.execute('notebook:run-all-cells').catch((e) => commandErrors.push(String(e)));
    return true;
  }

  function outputSummary(o) {
    const s = { type: o.output_type };
    if (o.output_type === 'stream') {
      s.name = o.name;
      s.text = Array.isArray(o.text) ? o.text.join('') : String(o.text);
    } else if (o.output_type === 'error') {
      s.text = `${o.ename}: ${o.evalue}\n${(o.traceback || []).join('\n')}`;
    } else if (o.data) {
      s.mimes = Object.keys(o.data);
      const plain = o.data['text/plain'];
      s.text = Array.isArray(plain) ? plain.join('') : (plain || '');
    }
    return s;
  }

  // The live view of a run: an ipywidgets/anywidget view around the timeline.
  const LIVE_WIDGET = '.jupyter-widgets, .woml-widget';

  function topTimelines(root) {
    return [...root.querySelectorAll('.woml-timeline')]
      .filter((t) => !t.parentElement.closest('.woml-timeline'));
  }

  function cells(path) {
    const p = panel(path);
    if (!p) return null;
    return p.content.widgets.map((c, index) => {
      const m = c.model;
      const rec = { index, type: m.type, source: m.sharedModel.getSource() };
      if (m.type !== 'code') return rec;
      rec.count = m.executionCount;
      rec.state = m.executionState === undefined ? null : m.executionState;
      const prompt = c.node.querySelector('.jp-InputPrompt');
      rec.prompt = prompt ? prompt.textContent.trim() : null;
      rec.outputs = m.outputs.toJSON().map(outputSummary);
      const area = c.node.querySelector('.jp-OutputArea');
      const text = area ? area.textContent : '';
      rec.widgetErrors = text.includes('Error displaying widget');
      rec.stderrDom = [...c.node.querySelectorAll(
        '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')]
        .map((n) => n.textContent);
      rec.timelines = topTimelines(c.node).map((t) => ({
        id: t.id,
        run: t.dataset.run === undefined ? null : t.dataset.run,
        status: t.dataset.status === undefined ? null : t.dataset.status,
        end: t.dataset.end === undefined ? null : t.dataset.end,
        inWidget: !!t.closest(LIVE_WIDGET),
        svgVisible: [...t.querySelectorAll('svg.woml-svg')].some(visible),
      }));
      return rec;
    });
  }

  // --- visibility ----------------------------------------------------------------
  function visible(el) {
    if (!el || !el.isConnected) return false;
    if (el.checkVisibility && !el.checkVisibility(
      { checkOpacity: true, checkVisibilityCSS: true, contentVisibilityAuto: true })) return false;
    const r = el.getBoundingClientRect();
    return r.width > 0 && r.height > 0;
  }

  // --- colour and contrast (WCAG 2.x) ------------------------------------------------
  const canvas = document.createElement('canvas');
  canvas.width = canvas.height = 1;
  let ctx = null;
  function rgba(css) {
    if (!css || css === 'none' || css === 'transparent') return [0, 0, 0, 0];
    const m = css.match(
      /^rgba?\(\s*([\d.]+)[,\s]+([\d.]+)[,\s]+([\d.]+)(?:\s*[,/]\s*([\d.]+)(%?))?\s*\)$/);
    if (m) {
      let a = m[4] === undefined ? 1 : parseFloat(m[4]);
      if (m[5] === '%') a /= 100;
      return [+m[1], +m[2], +m[3], a];
    }
    // Any other syntax (color(), oklab(), a keyword): let the canvas resolve it.
    ctx = ctx || canvas.getContext('2d', { willReadFrequently: true });
    ctx.clearRect(0, 0, 1, 1);
    ctx.fillStyle = 'rgba(0, 0, 0, 0)';
    ctx.fillStyle = css;
    ctx.fillRect(0, 0, 1, 1);
    const d = ctx.getImageData(0, 0, 1, 1).data;
    return [d[0], d[1], d[2], d[3] / 255];
  }
  const over = (top, bottom) => [0, 1, 2].map((i) => top[i] * top[3] + bottom[i] * (1 - top[3]))
    .concat([1]);
  function luminance(c) {
    const f = (v) => { v /= 255; return v <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]);
  }
  function ratio(a, b) {
    const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x);
    return (hi + 0.05) / (lo + 0.05);
  }
  const hex = (c) => '#' + c.slice(0, 3).map((v) => Math.round(v).toString(16).padStart(2, '0'))
    .join('') + (c[3] < 1 ? `/${c[3].toFixed(2)}` : '');
  function describe(el) {
    if (!el) return 'canvas (white)';
    const cls = typeof el.className === 'string' ? el.className : el.getAttribute('class');
    return el.tagName.toLowerCase() + (cls ? '.' + cls.trim().split(/\s+/).join('.') : '');
  }
  function contains(outer, inner, tol = 0.5) {
    return inner.left >= outer.left - tol && inner.right <= outer.right + tol
      && inner.top >= outer.top - tol && inner.bottom <= outer.bottom + tol;
  }
  function overlaps(a, b) {
    return Math.min(a.right, b.right) - Math.max(a.left, b.left) > 0.5
      && Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 0.5;
  }
  function svgOpacity(el) {
    let a = 1;
    for (let e = el; e && e instanceof SVGElement; e = e.parentElement) {
      a *= parseFloat(getComputedStyle(e).opacity);
    }
    return a;
  }

  // Background layers under `el`, top first: for SVG text the painted shapes before it
  // whose box holds the text's box (a bar's fill under its label), then every ancestor's
  // background-color up to the first opaque one; the page canvas (white) under all.
  function backgroundOf(el, box) {
    const layers = [];
    let from = null;
    const svg = el instanceof SVGElement ? (el.ownerSVGElement || el.closest('svg')) : null;
    if (svg) {
      const shapes = [...svg.querySelectorAll('rect, path, circle, ellipse, polygon')]
        .filter((s) => (s.compareDocumentPosition(el) & Node.DOCUMENT_POSITION_FOLLOWING)
          && !s.contains(el) && visible(s) && contains(s.getBoundingClientRect(), box));
      for (const s of shapes.reverse()) {
        const cs = getComputedStyle(s);
        if (!cs.fill || cs.fill === 'none' || cs.fill.startsWith('url(')) continue;
        const c = rgba(cs.fill);
        c[3] *= parseFloat(cs.fillOpacity) * svgOpacity(s);
        if (c[3] <= 0) continue;
        layers.push(c);
        from = from || s;
        if (c[3] >= 0.999) return { color: layers.reduceRight((acc, l) => over(l, acc)), from };
      }
    }
    let image = null;
    for (let e = svg || el; e; e = e.parentElement) {
      const cs = getComputedStyle(e);
      if (cs.backgroundImage && cs.backgroundImage !== 'none') image = image || describe(e);
      const c = rgba(cs.backgroundColor);
      if (c[3] <= 0) continue;
      layers.push(c);
      from = from || e;
      if (c[3] >= 0.999) break;
    }
    const color = layers.reduceRight((acc, l) => over(l, acc), [255, 255, 255, 1]);
    return { color, from, image };
  }

  // Every visible text node under `root` (HTML text and SVG <text>), with its colour,
  // effective background and contrast ratio. Closed <details> are opened first so
  // their contents are measured too (and closed again).
  function contrast(root) {
    const closed = [...root.querySelectorAll('details:not([open])')];
    closed.forEach((d) => { d.open = true; });
    const found = [];
    try {
      const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
      for (let n = walker.nextNode(); n; n = walker.nextNode()) {
        const text = n.textContent.trim();
        const el = n.parentElement;
        if (!text || !el || el.closest('script, style, title, desc')) continue;
        if (!visible(el)) continue;
        const range = document.createRange();
        range.selectNodeContents(n);
        const rects = [...range.getClientRects()].filter((r) => r.width > 0 && r.height > 0);
        if (!rects.length) continue;
        const cs = getComputedStyle(el);
        const isSvg = el instanceof SVGElement;
        const fg = rgba(isSvg ? cs.fill : cs.color);
        if (isSvg) fg[3] *= parseFloat(cs.fillOpacity) * svgOpacity(el);
        const box = (isSvg ? el : range).getBoundingClientRect();
        const bg = backgroundOf(el, box);
        const shown = over(fg, bg.color);
        found.push({
          text: text.slice(0, 60),
          element: describe(el),
          svg: isSvg,
          fg: hex(fg),
          bg: hex(bg.color),
          bgFrom: describe(bg.from),
          bgImage: bg.image || null,
          fontSize: cs.fontSize,
          ratio: Math.round(ratio(shown, bg.color) * 100) / 100,
        });
      }
    } finally {
      closed.forEach((d) => { d.open = false; });
    }
    return found;
  }

  function contrastOfTimelines() {
    return topTimelines(document).flatMap((t, i) =>
      contrast(t).map((r) => Object.assign(r, { timeline: t.id || `#${i}` })));
  }

  // SVG labels must lie inside a bar or clear of it (spec §6.3: labels that do not fit
  // a bar go beside it): the text boxes that straddle a bar's edge.
  function straddlingLabels(root) {
    const bars = [...root.querySelectorAll('rect.woml-bar')].filter(visible)
      .map((b) => [b, b.getBoundingClientRect()]);
    const out = [];
    for (const t of root.querySelectorAll('text')) {
      if (!visible(t)) continue;
      const box = t.getBoundingClientRect();
      for (const [bar, r] of bars) {
        if (overlaps(box, r) && !contains(r, box)) {
          const seg = bar.closest('.woml-seg');
          out.push({ text: t.textContent.trim(), bar: seg ? describe(seg) : describe(bar),
            step: seg && seg.dataset.step, n: seg && seg.dataset.n });
        }
      }
    }
    return out;
  }

  // Readable at any size (spec §6.3): no two pieces of text in a drawing overlap or
  // touch. Every visible text box of the SVG (labels, ticks, step column, legend, axis
  // breaks) against every other, each grown by `gap` px on every side.
  function textCollisions(root, gap = 0.5) {
    // A zoomed drawing clips its track (timeline.js): what the clip hides is not seen.
    const cut = (t) => {
      const r = t.getBoundingClientRect();
      const layer = t.closest('g.woml-zoom-clip');
      const clip = layer && layer.querySelector(':scope > clipPath > rect');
      if (!clip) return r;
      const c = clip.getBoundingClientRect();
      const left = Math.max(r.left, c.left);
      const right = Math.min(r.right, c.right);
      return right - left > 0.5 ? { left, right, top: r.top, bottom: r.bottom } : null;
    };
    const texts = [...root.querySelectorAll('text')]
      .filter((t) => visible(t) && svgOpacity(t) >= 0.5 && t.textContent.trim())
      .map((t) => [t, cut(t)])
      .filter(([, r]) => r !== null);
    const out = [];
    for (let i = 0; i < texts.length; i++) {
      for (let j = i + 1; j < texts.length; j++) {
        const [a, ra] = texts[i];
        const [b, rb] = texts[j];
        if (a.contains(b) || b.contains(a)) continue;  // a tspan inside its text
        const dx = Math.min(ra.right, rb.right) - Math.max(ra.left, rb.left);
        const dy = Math.min(ra.bottom, rb.bottom) - Math.max(ra.top, rb.top);
        if (dx > -gap && dy > -gap) {
          out.push({ a: a.textContent.trim(), b: b.textContent.trim(),
            aClass: describe(a), bClass: describe(b),
            dx: Math.round(dx * 10) / 10, dy: Math.round(dy * 10) / 10 });
        }
      }
    }
    return out;
  }


  // --- geometry of a timeline's SVG (spec §6.3: the axis is true to time) ------------
  function box(el) {
    const r = el.getBoundingClientRect();
    return { left: r.left, right: r.right, top: r.top, bottom: r.bottom,
      width: r.width, height: r.height };
  }
  const num = (v) => (v === undefined || v === '' ? null : Number(v));
  const KINDS = ['woml-attempt', 'woml-wait', 'woml-planned-wait', 'woml-planned'];

  // Shown as the user sees it: rendered, not transparent (a replay may fade the
  // future instead of removing it), not of zero size.
  function shown(el) {
    return !!el && visible(el) && svgOpacity(el) >= 0.5;
  }

  function geometry(timeline) {
    const svg = timeline.querySelector('svg.woml-svg');
    if (!svg) return null;
    const segs = [...svg.querySelectorAll('g.woml-seg')].map((g) => {
      const bar = g.querySelector('rect.woml-bar');
      const label = g.querySelector('text.woml-label');
      return {
        kind: (KINDS.find((k) => g.classList.contains(k)) || '').replace('woml-', ''),
        classes: [...g.classList],
        step: g.dataset.step === undefined ? null : g.dataset.step,
        n: num(g.dataset.n),
        t0: num(g.dataset.t0), t1: num(g.dataset.t1),
        x0: num(g.dataset.x0), x1: num(g.dataset.x1),
        bar: bar ? box(bar) : null,
        shown: shown(bar || g),
        label: label ? label.textContent.trim() : null,
        labelShown: shown(label),
      };
    });
    const breaks = [...svg.querySelectorAll('g.woml-break')].map((g) => ({
      t0: num(g.dataset.t0), t1: num(g.dataset.t1), text: g.textContent.trim(),
      shown: shown(g), box: box(g),
    }));
    let clip = null;
    for (let e = svg.parentElement; e && e !== document.body; e = e.parentElement) {
      const ox = getComputedStyle(e).overflowX;
      if (ox !== 'visible') {
        clip = { element: describe(e), overflowX: ox, box: box(e),
          scrollWidth: e.scrollWidth, clientWidth: e.clientWidth };
        break;
      }
    }
    let axis = null;
    try { axis = svg.dataset.axis ? JSON.parse(svg.dataset.axis) : null; } catch (e) { axis = 'invalid'; }
    // A drawing stretched to fill its output or zoomed (timeline.js) maps data-axis x
    // through its g.woml-zoom's transform as well.
    const ctm = (svg.querySelector('g.woml-zoom') || svg).getScreenCTM();
    return {
      visibilityState: document.visibilityState, hasFocus: document.hasFocus(),
      svgDisplay: getComputedStyle(svg).display,
      hiddenBy: (() => {
        let last = null;
        for (let e = svg; e; e = e.parentElement) {
          const cs = getComputedStyle(e);
          if (cs.display === 'none' || cs.contentVisibility !== 'visible') return describe(e) + ' ' + cs.display + ' ' + cs.contentVisibility;
          if (e.getClientRects().length === 0) last = describe(e);
        }
        return last;
      })(),
      id: timeline.id, run: timeline.dataset.run || null, end: num(timeline.dataset.end),
      status: timeline.dataset.status || null,
      svg: box(svg), ctm: ctm ? { a: ctm.a, e: ctm.e } : null, axis, segs, breaks, clip,
      legend: !!timeline.querySelector('.woml-legend'),
      straddling: straddlingLabels(svg),
      collisions: textCollisions(svg),
    };
  }

  function geometries() { return topTimelines(document).map(geometry).filter((g) => g); }

  // --- replay ------------------------------------------------------------------------
  function replayState(timeline) {
    const slider = timeline.querySelector('input.woml-slider[type=range]');
    const time = timeline.querySelector('span.woml-time');
    const play = timeline.querySelector('button.woml-play');
    const attempts = [...timeline.querySelectorAll('.woml-seg.woml-attempt')];
    return {
      id: timeline.id, end: num(timeline.dataset.end),
      slider: slider ? { value: +slider.value, min: +slider.min, max: +slider.max,
        step: slider.step } : null,
      time: time ? time.textContent.trim() : null,
      play: play ? { text: play.textContent.trim(), visible: visible(play) } : null,
      attempts: attempts.length,
      shown: attempts.filter((a) => shown(a.querySelector('rect.woml-bar') || a)).length,
    };
  }

  function rewind(timeline) {
    const slider = timeline.querySelector('input.woml-slider[type=range]');
    slider.value = slider.min;
    slider.dispatchEvent(new Event('input', { bubbles: true }));
    slider.dispatchEvent(new Event('change', { bubbles: true }));
    return replayState(timeline);
  }

  window.__woml = {
    panel, kernelStatus, runAll, cells, commandErrors, visible, contrast,
    contrastOfTimelines, straddlingLabels, textCollisions, topTimelines, rgba, ratio, geometry, geometries,
    replayState, rewind, shown,
  };
})();
