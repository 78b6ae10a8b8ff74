import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as ProtectAnEffect from "../examples/protect-an-effect.js"
import { program } from "../examples/quickstart.js"
import * as RequestClasses from "../examples/request-classes.js"

describe("README quick start and the core's examples", () => {
  it.effect("quick start: charges once and replays the receipt to the retry", () =>
    Effect.gen(function*() {
      const { first, retry } = yield* program
      assert.isFalse(first.replayed)
      assert.isTrue(retry.replayed)
      assert.deepStrictEqual(retry.value, first.value)
    }))

  it.effect("protect an effect: one charge per tenant and key, declines replayed", () =>
    Effect.gen(function*() {
      const { declined, declinedAgain, first, otherTenant, retry } = yield* ProtectAnEffect.program
      assert.instanceOf(first.value, ProtectAnEffect.Receipt)
      assert.deepStrictEqual([first.replayed, retry.replayed, otherTenant.replayed], [false, true, false])
      assert.deepStrictEqual(retry.value, first.value)
      assert.notDeepEqual(otherTenant.value.chargeId, first.value.chargeId)
      assert.instanceOf(declined, ProtectAnEffect.PaymentDeclined)
      assert.deepStrictEqual(declinedAgain, declined)
    }))

  it.effect("request classes: one order per key, typed failures, the stock taken once", () =>
    Effect.gen(function*() {
      const { again, cancelled, order, shipped, soldOut, stockLeft } = yield* RequestClasses.program
      assert.instanceOf(order, RequestClasses.Order)
      assert.isTrue(again.replayed)
      assert.deepStrictEqual(again.value, order)
      assert.instanceOf(soldOut, RequestClasses.OutOfStock)
      assert.deepStrictEqual(cancelled, { cancelled: true })
      assert.match(shipped.trackingId, /^track-/)
      assert.strictEqual(stockLeft, 3)
    }))
})
