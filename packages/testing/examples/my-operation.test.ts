/**
 * Property-check an idempotent operation under a platform's retries. Copy this file next to your
 * operation: point `operation` at it, simulate the API it calls over `SimulatedDownstream`, and
 * pick the platform it runs on.
 */
import { Idempotency } from "@effect-idempotency/core"
import { PlatformModel, RetryProperty, SimulatedDownstream } from "@effect-idempotency/testing"
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer, Schema } from "effect"

// Your application (normally imported): a payments API, and the charge that must not happen twice.

class PaymentDeclined extends Schema.TaggedError<PaymentDeclined>()("PaymentDeclined", {}) {}
class PaymentsUnavailable extends Schema.TaggedError<PaymentsUnavailable>()("PaymentsUnavailable", {}) {}

// In production, `charge` posts to https://payments.example/charges through an HttpClient wrapped by
// `IdempotencyHttpClient`, which sends the operation's step key as the request's Idempotency-Key.
class PaymentsApi extends Context.Tag("app/PaymentsApi")<PaymentsApi, {
  readonly charge: (
    request: { readonly customerId: string; readonly amountCents: number }
  ) => Effect.Effect<{ readonly chargeId: string }, PaymentDeclined | PaymentsUnavailable>
}>() {}

export const chargeCustomer = Idempotency.make({
  name: "charge-customer",
  payload: Schema.Struct({ customerId: Schema.String, amountCents: Schema.Int }),
  success: Schema.Struct({ chargeId: Schema.String }),
  failure: PaymentDeclined, // declines are recorded and replayed; outages release the key
  timeout: "2 seconds",
  execute: (charge) => Effect.flatMap(PaymentsApi, (api) => api.charge(charge))
})

// The payments API, simulated. Its endpoint is the request's method and URL: inside the operation a
// call carries the key `IdempotencyHttpClient` would send. It deduplicates by that key, like most
// payment APIs.

const PaymentsApiSimulated = Layer.effect(
  PaymentsApi,
  Effect.map(SimulatedDownstream.SimulatedDownstream, (downstream) => ({
    charge: (request) =>
      downstream.call({ endpoint: "POST https://payments.example/charges", body: request }).pipe(
        Effect.map((receipt) => ({ chargeId: `ch_${receipt.writeId}` })),
        Effect.mapError((error) => error.code === "Declined" ? new PaymentDeclined() : new PaymentsUnavailable())
      )
  }))
)

// The property: the operation, the request every delivery sends, the platform, and the API.

const property = {
  operation: chargeCustomer,
  payload: { customerId: "cus_42", amountCents: 1999 },
  platform: PlatformModel.awsLambdaAsync,
  deduplicate: true,
  services: PaymentsApiSimulated,
  downstream: { failures: ["Declined", "Unavailable"] },
  require: "exactlyOnce" as const
}

describe("charge-customer", () => {
  // one case per fast-check run: your runner, your seed, your number of runs
  it.effect.prop(
    "charges once under AWS Lambda's retries, duplicate deliveries and crashes",
    [RetryProperty.arbitrary(property)],
    ([scenario]) => RetryProperty.check(property)(scenario),
    { timeout: 120_000, fastCheck: { numRuns: 200 } }
  )

  // or in one call, which also reports the guarantee over every case
  it.effect("gives exactly once, with the payments API's deduplication", () =>
    Effect.gen(function*() {
      const report = yield* RetryProperty.assert(property, { numRuns: 100 })
      assert.strictEqual(report.guarantee, "exactlyOnceWithDeduplication")
    }), { timeout: 120_000 })
})
