// The settings page's only script (no inline script or handler anywhere): copy, select-all per group,
// confirmations, times in the browser's time zone, and live regions refreshed without a reload.
document.addEventListener("click", (event) => {
  const copy = event.target.closest("[data-copy]");
  if (copy) {
    const text = document.getElementById(copy.dataset.copy).textContent.trim();
    navigator.clipboard.writeText(text).then(() => { copy.textContent = "Copied"; });
  }
  const all = event.target.closest("[data-select-group]");
  if (all) {
    const boxes = document.querySelectorAll(`input[data-group="${all.dataset.selectGroup}"]`);
    const on = ![...boxes].every((box) => box.checked);
    boxes.forEach((box) => { box.checked = on; });
  }
});
document.addEventListener("submit", (event) => {
  const message = event.target.dataset.confirm;
  if (message && !window.confirm(message)) event.preventDefault();
});

// Times: the server writes UTC (<time datetime="...Z" title="... UTC">); show local time and how long ago.
const LOCAL = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "medium" });
const RELATIVE = new Intl.RelativeTimeFormat(undefined, { numeric: "auto" });
const UNITS = [["day", 86400], ["hour", 3600], ["minute", 60], ["second", 1]];

function ago(moment) {
  const seconds = (moment.getTime() - Date.now()) / 1000;
  for (const [unit, size] of UNITS) {
    if (Math.abs(seconds) >= size || unit === "second") return RELATIVE.format(Math.round(seconds / size), unit);
  }
  return "";
}

const HOUR = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit" });

function localTimes(root) {
  root.querySelectorAll("time[datetime]").forEach((element) => {
    const moment = new Date(element.getAttribute("datetime"));
    if (Number.isNaN(moment.getTime())) return;
    // A chart's hour label (data-hour) is only the hour; any other time says how long ago, too, and a due
    // time (data-due) that has passed says it is due, not that it comes "1 minute ago".
    const late = "due" in element.dataset && moment.getTime() <= Date.now() ? "due " : "";
    element.textContent = "hour" in element.dataset ? HOUR.format(moment) : `${LOCAL.format(moment)} · ${late}${ago(moment)}`;
  });
}

// The deliveries filter's From and To (<input data-utc>): UTC in the URL, the browser's zone on screen, like
// the rows. Shown: UTC -> local. Submitted: local -> UTC.
const pad = (n) => String(n).padStart(2, "0");
const minutes = (d, utc) => utc
  ? `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())}T${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}`
  : `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;

function localInputs(root) {
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  root.querySelectorAll("input[data-utc]").forEach((input) => {
    const moment = new Date(`${input.value}Z`);
    if (input.value && !Number.isNaN(moment.getTime())) input.value = minutes(moment, false);
  });
  root.querySelectorAll("[data-zone]").forEach((label) => { label.textContent = `(${zone})`; });
}

document.addEventListener("submit", (event) => {
  if (event.defaultPrevented) return;
  event.target.querySelectorAll("input[data-utc]").forEach((input) => {
    const moment = new Date(input.value); // a datetime-local value is read in the browser's zone
    if (input.value && !Number.isNaN(moment.getTime())) input.value = minutes(moment, true);
  });
});

// Live regions: <section id="..." data-live="URL"> is replaced by the same region of URL every
// LIVE_MS, keeping open <details> open and marking rows that were not there before.
const LIVE_MS = 1500;
const served = new WeakMap(); // region -> the HTML the server last sent for it

function openKeys(region) {
  return new Set([...region.querySelectorAll("details[open][data-key]")].map((d) => d.dataset.key));
}

async function refresh(region) {
  const response = await fetch(region.dataset.live, { headers: { Accept: "text/html" }, credentials: "same-origin" });
  if (!response.ok || response.redirected) return false; // signed out or gone: stop
  const page = new DOMParser().parseFromString(await response.text(), "text/html");
  const fresh = page.getElementById(region.id);
  if (!fresh || fresh.innerHTML === served.get(region)) return true;
  const open = openKeys(region);
  const seen = new Set([...region.querySelectorAll("[data-delivery]")].map((row) => row.dataset.delivery));
  served.set(region, fresh.innerHTML);
  region.innerHTML = fresh.innerHTML;
  region.querySelectorAll("details[data-key]").forEach((d) => { if (open.has(d.dataset.key)) d.open = true; });
  region.querySelectorAll("[data-delivery]").forEach((row) => {
    if (!seen.has(row.dataset.delivery)) row.classList.add("fresh");
  });
  localTimes(region);
  return true;
}

function live(region) {
  const tick = async () => {
    let going = true;
    if (document.visibilityState === "visible") {
      try { going = await refresh(region); } catch { going = true; }
    }
    if (going) window.setTimeout(tick, LIVE_MS);
  };
  window.setTimeout(tick, LIVE_MS);
}

document.addEventListener("DOMContentLoaded", () => {
  const regions = [...document.querySelectorAll("[data-live][id]")];
  regions.forEach((region) => served.set(region, region.innerHTML));
  localTimes(document);
  localInputs(document);
  window.setInterval(() => localTimes(document), 30000);
  regions.forEach(live);
});
