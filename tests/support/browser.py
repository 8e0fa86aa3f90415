"""Browser helpers shared by the e2e tests: a quote asked for through the booking form, and
the in-page check for what pokes out, what money is cut off and which charts are flat."""

import os
import re
import shutil
from pathlib import Path

import pytest

# In the page: what pokes out, what money is cut off, which charts are flat. A scroll
# container "says so" when it is a labelled, focusable region (role=region, aria-label,
# tabindex=0), which is how a keyboard or screen-reader user learns it scrolls.
LAYOUT_PROBLEMS = """() => {
  const vw = document.documentElement.clientWidth;
  const name = el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
    (el.className && typeof el.className === 'string' ? '.' + el.className.trim().split(/\\s+/).join('.') : '');
  const scrolls = el => { const s = getComputedStyle(el); return ['auto', 'scroll'].includes(s.overflowX); };
  const clips = el => { const s = getComputedStyle(el); return ['hidden', 'clip'].includes(s.overflowX); };
  const says = el => el.matches('[role=region][aria-label][tabindex="0"]');
  const visible = el => { const s = getComputedStyle(el); return s.visibility !== 'hidden' && s.display !== 'none'; };
  const problems = {overflow: [], money: [], charts: [], page: null};
  if (document.documentElement.scrollWidth > vw + 1) {
    // The page is wider than the screen: name the innermost elements that reach past it.
    const past = [...document.body.querySelectorAll('*')].filter(el => el.getBoundingClientRect().right > vw + 1);
    const innermost = past.filter(el => !past.some(other => other !== el && el.contains(other)));
    problems.page = document.documentElement.scrollWidth + ' px, past the edge: ' +
      innermost.slice(0, 5).map(el => name(el) + ' right=' + Math.round(el.getBoundingClientRect().right)).join(', ');
  }
  for (const el of document.body.querySelectorAll('*')) {
    if (!visible(el) || el.closest('.visually-hidden, .skip, [hidden], details:not([open]) > :not(summary)')) continue;
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.height === 0) continue;
    if (r.right <= vw + 1 && r.left >= -1) continue;
    let holder = el.parentElement, ok = false;
    for (; holder && holder !== document.body; holder = holder.parentElement) {
      if (scrolls(holder)) { ok = says(holder); break; }
      if (clips(holder)) { const h = holder.getBoundingClientRect(); ok = h.right <= vw + 1 && h.left >= -1; break; }
    }
    if (!ok) problems.overflow.push(name(el) + ' right=' + Math.round(r.right));
  }
  // Money: a number and a currency code. Each must lie wholly on screen and inside every
  // box that clips or scrolls it, and must not be cut short with an ellipsis.
  const MONEY = /\\d[\\d\\u00a0\\u202f ,.]*\\s(?:USD|EUR|PLN|GBP|CHF|JPY)\\b/;
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let t = walker.nextNode(); t; t = walker.nextNode()) {
    const m = t.textContent.match(MONEY);
    if (!m) continue;
    const el = t.parentElement;
    if (!visible(el) || el.closest('.visually-hidden, [hidden], option, details:not([open]) > :not(summary), script, template')) continue;
    const range = document.createRange();
    range.setStart(t, m.index); range.setEnd(t, m.index + m[0].length);
    const rects = [...range.getClientRects()];
    if (!rects.length) continue;
    const left = Math.min(...rects.map(x => x.left)), right = Math.max(...rects.map(x => x.right));
    let hidden = right > vw + 1 || left < -1;
    for (let p = el; p && p !== document.body && !hidden; p = p.parentElement) {
      const s = getComputedStyle(p);
      if (s.textOverflow === 'ellipsis' && p.scrollWidth > p.clientWidth + 1) hidden = true;
      if (scrolls(p) || clips(p)) { const b = p.getBoundingClientRect(); hidden = right > b.right + 1 || left < b.left - 1; }
    }
    if (hidden) problems.money.push(m[0].trim() + ' in ' + name(el));
  }
  for (const c of document.querySelectorAll('canvas')) {
    if (visible(c) && c.getBoundingClientRect().height < 40) problems.charts.push(name(c));
  }
  return problems;
}"""


def get_quote(page, live_server, model="l4", gpus="2"):
    """Ask for a quote on the booking form (two days, 1 TB of scratch) and land on it."""
    page.goto(f"{live_server.url}/book/{model}/")
    page.get_by_label("GPUs").fill(gpus)
    page.get_by_label("Rental period").select_option("day")
    page.get_by_label("Number of periods").fill("2")
    page.get_by_label("NVMe scratch (TB)").fill("1")
    page.get_by_role("button", name="Get a quote").click()
    page.wait_for_url(re.compile(r"/quotes/"))


def chromium_path():
    """The headless shell where it is installed (`make test` installs it), else a full
    chromium in headless mode; CHROMIUM names another."""
    for candidate in (
        os.environ.get("CHROMIUM"),
        shutil.which("chromium-headless-shell"),
        shutil.which("chromium"),
    ):
        if candidate and Path(candidate).exists():
            return candidate
    pytest.fail(
        "Debian's chromium-headless-shell is missing: `make test` installs it"
        " (apt-get install chromium-headless-shell)"
    )
