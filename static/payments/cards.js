// Save a card: Stripe.js collects it straight into the processor (a SetupIntent); only
// the resulting payment method id (pm_…) is posted to us.
(function () {
  const form = document.getElementById("card-form");
  if (!form || typeof Stripe === "undefined") return;
  const stripe = Stripe(form.dataset.stripeKey);
  const card = stripe.elements().create("card");
  card.mount("#card-element");
  form.addEventListener("submit", async function (event) {
    if (document.getElementById("payment-method").value) return;
    event.preventDefault();
    const result = await stripe.confirmCardSetup(form.dataset.clientSecret, {
      payment_method: { card: card },
    });
    if (result.error) {
      document.getElementById("card-error").textContent = result.error.message || String(result.error);
      return;
    }
    document.getElementById("payment-method").value = result.setupIntent.payment_method;
    form.submit();
  });
})();
