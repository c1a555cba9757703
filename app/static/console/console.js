// The merchant console's small helpers (no framework; CSP allows only this origin's scripts).
// Copy buttons: <button data-copy="#element-id">Copy</button> copies that element's data-value, or
// its text (a shortened hash keeps the whole value in data-value).
document.addEventListener("click", (event) => {
  const button = event.target.closest("button[data-copy]");
  if (!button) return;
  const source = document.querySelector(button.dataset.copy);
  if (!source || !navigator.clipboard) return;
  navigator.clipboard.writeText((source.dataset.value || source.textContent).trim()).then(() => {
    const label = button.textContent;
    button.textContent = "Copied";
    setTimeout(() => { button.textContent = label; }, 1500);
  });
});

// A section with data-refresh="<url of this page>" follows a status the server changes by itself
// (a refund the chain watcher settles): every 5 s the page is read again and, when the element
// #…-status inside it says something else, the page reloads to show it.
const following = document.querySelector("[data-refresh]");
if (following) {
  const status = following.querySelector("[id$='-status']");
  setInterval(async () => {
    try {
      const response = await fetch(following.dataset.refresh, { credentials: "same-origin" });
      if (!response.ok) return;
      const page = new DOMParser().parseFromString(await response.text(), "text/html");
      const now = page.getElementById(status.id);
      if (now && now.textContent !== status.textContent) location.reload();
    } catch (error) {
      // offline for a moment: the next tick tries again
    }
  }, 5000);
}
