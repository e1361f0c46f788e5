"""Every staff page of the demo, at a phone's 390 px and a desktop's 1,280 px (the admin's
sidebar open), measured in Debian's Chromium: nothing wider than the window, no table cell
narrower than three characters or wrapped past three lines, no column scrolled out of
sight inside its box. A page that fails names the page, the width and what is wrong.
"""

# What is wrong with the page's layout, as sentences (an empty list: nothing). A character
# is the width of "0" in the cell's own font; a line is the cell's line height (1.2 times
# its font size when the line height is "normal").
CHECK_LAYOUT = r"""() => {
  const problems = [];
  const root = document.documentElement;
  if (root.scrollWidth > window.innerWidth) {
    problems.push(`the page is ${root.scrollWidth} px wide in a ${window.innerWidth} px window`);
  }
  const canvas = document.createElement('canvas').getContext('2d');
  const shown = (e) => e.getClientRects().length > 0 && getComputedStyle(e).visibility !== 'hidden';
  const name = (cell) => {
    const row = cell.closest('tr');
    const table = cell.closest('table');
    const label = table.id || table.className || 'table';
    return `${label} cell "${cell.innerText.trim().slice(0, 30)}" (${cell.className || cell.tagName})`;
  };
  for (const cell of document.querySelectorAll('#content td, #content th')) {
    if (!shown(cell) || !cell.innerText.trim()) continue;
    const style = getComputedStyle(cell);
    canvas.font = style.font;
    const character = canvas.measureText('0').width;
    const width = cell.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    if (width < 3 * character) {
      problems.push(`${name(cell)} is ${Math.round(width)} px wide, under 3 characters`);
    }
    // Lines of data (JSON, a list of fields, a nested table) are not text wrapping.
    if (cell.querySelector('pre, dl, details, table, ul, ol')) continue;
    const range = document.createRange();
    range.selectNodeContents(cell);
    const fontSize = parseFloat(style.fontSize);
    const lineHeight = style.lineHeight === 'normal' ? 1.2 * fontSize : parseFloat(style.lineHeight);
    // Text clamped to a few lines (overflow hidden) shows only what its box holds.
    const clip = [...cell.querySelectorAll('*')].find((e) => getComputedStyle(e).overflowY !== 'visible');
    let height = range.getBoundingClientRect().height;
    if (clip) height -= clip.scrollHeight - clip.clientHeight;
    // Parts stacked on lines of their own (a question, its path, its assignees) count as
    // one line: what is measured is how far the cell's text wraps.
    const parts = cell.innerText.split('\n').filter((part) => part.trim()).length;
    const lines = Math.round(height / lineHeight) - (parts - 1);
    if (lines > 3) {
      problems.push(`${name(cell)} wraps into ${lines} lines`);
    }
  }
  for (const box of document.querySelectorAll('#content *')) {
    if (!box.querySelector('table') || !shown(box)) continue;
    if (getComputedStyle(box).overflowX === 'visible') continue;
    if (box.scrollWidth > box.clientWidth + 1) {
      problems.push(`${box.id || box.className || box.tagName} hides ${box.scrollWidth - box.clientWidth} px of its table behind a scroll`);
    }
  }
  return problems;
}"""
