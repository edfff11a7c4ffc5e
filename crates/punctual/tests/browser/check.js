// What a reader of the report sees, measured by Chromium's own layout: the report is loaded
// unchanged in an iframe of a page holding this script (the report itself has none), and the
// findings are written into this page's <pre id="out"> for --dump-dom.
function findings(d, w) {
  const problems = [];
  const vw = w.innerWidth;
  // No section without content beyond its heading.
  for (const s of d.querySelectorAll('section')) {
    const rest = [...s.children].filter((e) => e.tagName !== 'H2');
    const has = rest.some((e) => e.textContent.trim() !== '' || e.querySelector('svg,img'));
    if (!has) problems.push(`section #${s.id} is empty`);
  }
  // Nothing wider than the window.
  if (d.documentElement.scrollWidth > vw) {
    problems.push(`the page is ${d.documentElement.scrollWidth}px wide in a ${vw}px window`);
  }
  for (const el of d.querySelectorAll('table,figure,svg,img,pre,p,h1,h2,h3')) {
    const r = el.getBoundingClientRect();
    if (r.right > vw + 0.5) {
      problems.push(`clipped: <${el.tagName.toLowerCase()}> reaches ${r.right.toFixed(0)}px of ${vw}`);
    }
  }
  // Every text at 12 px or more as drawn (SVG text scaled by its figure).
  const tw = d.createTreeWalker(d.body, NodeFilter.SHOW_TEXT);
  let smallest = 1e9;
  let smallestText = '';
  while (tw.nextNode()) {
    const n = tw.currentNode;
    const text = n.textContent.trim();
    if (!text) continue;
    const el = n.parentElement;
    if (el.closest('style,title,script')) continue;
    let px = parseFloat(w.getComputedStyle(el).fontSize);
    if (el.closest('svg')) {
      const m = el.getScreenCTM();
      px *= Math.hypot(m.a, m.b);
    }
    if (px < smallest) {
      smallest = px;
      smallestText = text.slice(0, 40);
    }
    if (px < 11.95) problems.push(`${px.toFixed(1)} px text: '${text.slice(0, 40)}'`);
  }
  // Figures: text inside the figure, no two texts overlapping, no axis whose ticks all read alike.
  let texts = 0;
  for (const svg of d.querySelectorAll('svg')) {
    const title = (svg.querySelector('title') || {}).textContent || '(untitled)';
    const sb = svg.getBoundingClientRect();
    const boxes = [...svg.querySelectorAll('text')]
      .filter((t) => t.textContent.trim())
      .map((t) => ({ t, r: t.getBoundingClientRect(), s: t.textContent.trim() }));
    texts += boxes.length;
    for (const b of boxes) {
      if (b.r.left < sb.left - 1 || b.r.right > sb.right + 1 || b.r.top < sb.top - 1 || b.r.bottom > sb.bottom + 1) {
        problems.push(`${title}: '${b.s}' reaches outside the figure`);
      }
    }
    for (let i = 0; i < boxes.length; i++) {
      for (let j = i + 1; j < boxes.length; j++) {
        const a = boxes[i].r, b = boxes[j].r;
        const wx = Math.min(a.right, b.right) - Math.max(a.left, b.left);
        const hy = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
        if (wx > 1 && hy > 1 && wx * hy > 4) {
          problems.push(`${title}: '${boxes[i].s}' overlaps '${boxes[j].s}'`);
        }
      }
    }
    const axes = {};
    for (const { t, s } of boxes) {
      if (t.getAttribute('transform')) continue;
      const anchor = t.getAttribute('text-anchor');
      const key = anchor === 'end' ? 'y@' + t.getAttribute('x') : anchor === 'middle' ? 'x@' + t.getAttribute('y') : null;
      if (key) (axes[key] = axes[key] || []).push(s);
    }
    for (const [k, v] of Object.entries(axes)) {
      if (v.length >= 3 && new Set(v).size === 1) problems.push(`${title}: every tick of an axis reads '${v[0]}'`);
    }
  }
  for (const img of d.querySelectorAll('img')) {
    if (!(img.naturalWidth > 0)) problems.push(`image '${img.alt}' does not show`);
  }
  return {
    problems,
    height: d.documentElement.scrollHeight,
    width: d.documentElement.scrollWidth,
    viewport: vw,
    figures: d.querySelectorAll('svg').length,
    images: d.querySelectorAll('img').length,
    svg_texts: texts,
    smallest_text_px: smallest,
    smallest_text: smallestText,
    sections: [...d.querySelectorAll('section')].map((s) => s.id),
  };
}

window.addEventListener('load', () => {
  let out;
  try {
    const f = document.getElementById('report');
    out = findings(f.contentDocument, f.contentWindow);
  } catch (e) {
    out = { problems: ['the check itself failed: ' + e] };
  }
  document.getElementById('out').textContent = JSON.stringify(out);
});
