// Complete 3-D Secure with Stripe.js, then send the purchase again with the same key: it
// books once.
(function () {
  const box = document.getElementById("authenticate");
  if (!box || typeof Stripe === "undefined") return;
  const stripe = Stripe(box.dataset.stripeKey);
  document.getElementById("authenticate-start").addEventListener("click", async function () {
    const result = await stripe.confirmCardPayment(box.dataset.clientSecret);
    const words = document.getElementById("authenticate-result");
    if (result.error) {
      words.textContent = result.error.message || box.dataset.failed;
      return;
    }
    words.textContent = box.dataset.done;
    const form = document.getElementById("book-again");
    if (form) form.submit();
  });
})();
