// DOM helpers of the footprint panel. Text is always set with textContent, never parsed as HTML, so nothing from a
// user's file (a model name, a module path, a file name) can inject markup.

export type Cell = string | number | { text: string; cls?: string; title?: string };

export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  text?: string,
  cls?: string,
): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}

/** A custom element (the controls of @vscode-elements/elements) with attributes. */
export function custom(
  tag: string,
  attrs: Record<string, string | boolean> = {},
  text?: string,
): HTMLElement {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === false) continue;
    e.setAttribute(k, v === true ? '' : v);
  }
  if (text !== undefined) e.textContent = text;
  return e;
}

export function table(
  headers: string[],
  rows: Cell[][],
  opts: { numeric?: number[]; caption?: string; rowClass?: (i: number) => string | undefined } = {},
): HTMLTableElement {
  const t = el('table');
  if (opts.caption) t.append(el('caption', opts.caption));
  const thead = el('thead');
  const head = el('tr');
  headers.forEach((h, i) => {
    const th = el('th', h, opts.numeric?.includes(i) ? 'num' : undefined);
    th.scope = 'col';
    head.append(th);
  });
  thead.append(head);
  const tbody = el('tbody');
  rows.forEach((r, ri) => {
    const tr = el('tr');
    const rc = opts.rowClass?.(ri);
    if (rc) tr.className = rc;
    r.forEach((c, i) => {
      const cell = typeof c === 'object' ? c : { text: String(c) };
      const td = el('td', cell.text);
      // Its column's name, which a narrow panel shows before the value (the table reflows into one block a row).
      if (headers[i]) td.dataset.label = headers[i];
      const cls = [opts.numeric?.includes(i) ? 'num' : '', cell.cls ?? ''].filter(Boolean).join(' ');
      if (cls) td.className = cls;
      if (cell.title) td.title = cell.title;
      tr.append(td);
    });
    tbody.append(tr);
  });
  t.append(thead, tbody);
  return t;
}

/** Sections the user closed, kept closed when the panel redraws (each what-if redraws it). */
const closed = new Set<string>();

/** Sections closed at first that the user opened. */
const opened = new Set<string>();

/**
 * A section that folds: its title a `<summary>`, open unless the user closed it (or, `closedAtFirst`, closed until
 * the user opens it: a section whose figures cost time to compute).
 */
export function section(title: string, id: string, closedAtFirst = false): HTMLDetailsElement {
  const s = el('details');
  s.id = id;
  s.className = 'section';
  s.open = closedAtFirst ? opened.has(id) : !closed.has(id);
  const head = el('summary');
  head.append(el('h2', title));
  s.append(head);
  s.addEventListener('toggle', () => {
    const kept = closedAtFirst ? opened : closed;
    if (s.open === closedAtFirst) kept.add(id);
    else kept.delete(id);
  });
  return s;
}
