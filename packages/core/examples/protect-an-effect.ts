/**
 * Protecting an effect you already have with the pipeable `Idempotency.once`: a charge through a
 * payments API that declines some charges (declines are recorded and replayed; an outage is
 * released, so a retry charges again), scoped per tenant.
 */
import { Idempotency, IdempotencyContext, IdempotencyStore } from "@effect-idempotency/core"
import { Context, Effect, Layer, Schema } from "effect"

export const Charge = Schema.Struct({ customerId: Schema.String, amountCents: Schema.Int })
export type Charge = typeof Charge.Type
export class Receipt extends Schema.Class<Receipt>("Receipt")({ chargeId: Schema.String, amountCents: Schema.Int }) {}
export class PaymentDeclined extends Schema.TaggedError<PaymentDeclined>()("PaymentDeclined", {
  reason: Schema.String
}) {}
export class PaymentsUnavailable extends Schema.TaggedError<PaymentsUnavailable>()("PaymentsUnavailable", {}) {}

/** The application's payments API, as it was before idempotency came along. */
export class Payments extends Context.Tag("examples/Payments")<Payments, {
  readonly charge: (
    charge: Charge,
    idempotencyKey: string
  ) => Effect.Effect<Receipt, PaymentDeclined | PaymentsUnavailable>
}>() {}

/** An in-memory payments API that counts the charges it makes. */
export const PaymentsInMemory = Layer.sync(Payments, () => {
  let charges = 0
  return Payments.of({
    charge: (charge, idempotencyKey) =>
      Effect.suspend(() => {
        if (charge.amountCents > 100_000) return Effect.fail(new PaymentDeclined({ reason: "over the limit" }))
        charges++
        return Effect.succeed(
          new Receipt({ chargeId: `ch_${charges}_${idempotencyKey.slice(0, 6)}`, amountCents: charge.amountCents })
        )
      })
  })
})

/** The existing effect: nothing in it knows about idempotency but the forwarded key. */
export const chargeCustomer = (charge: Charge) =>
  Effect.gen(function*() {
    const payments = yield* Payments
    return yield* payments.charge(charge, yield* IdempotencyContext.stepKey("payments"))
  })

/** The same effect, protected: once per tenant and client key. */
export const chargeOnce = (charge: Charge, request: { readonly key: string; readonly tenant: string }) =>
  chargeCustomer(charge).pipe(
    Idempotency.once({
      operation: "charge",
      key: request.key,
      scope: request.tenant,
      payload: charge,
      payloadSchema: Charge,
      success: Receipt,
      failure: PaymentDeclined, // declines are recorded and replayed; an outage releases the key
      timeout: "8 seconds"
    })
  )

export const program = Effect.gen(function*() {
  const charge = { customerId: "cus_42", amountCents: 1999 }
  const first = yield* Idempotency.result(chargeOnce(charge, { key: "k-1", tenant: "acme" }))
  const retry = yield* Idempotency.result(chargeOnce(charge, { key: "k-1", tenant: "acme" }))
  const otherTenant = yield* Idempotency.result(chargeOnce(charge, { key: "k-1", tenant: "globex" }))
  const declined = yield* Effect.flip(chargeOnce({ ...charge, amountCents: 500_000 }, { key: "k-2", tenant: "acme" }))
  const declinedAgain = yield* Effect.flip(
    chargeOnce({ ...charge, amountCents: 500_000 }, { key: "k-2", tenant: "acme" })
  )
  return { first, retry, otherTenant, declined, declinedAgain }
}).pipe(Effect.provide(Layer.merge(PaymentsInMemory, IdempotencyStore.layerMemoryWith({ warn: false }))))
