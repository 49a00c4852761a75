// Copy-to-clipboard and select-all-per-group: the only script the settings page needs.
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
