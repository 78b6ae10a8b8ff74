/**
 * Spans: none of the store's own by default (the caller's span covers the call); with `spans: true`,
 * one per store call, `RedisStore.<method>`, a child of the caller's, tagged `db.system: redis`.
 */
import { IdempotencyRecord, IdempotencyStore } from "@effect-idempotency/core"
import { RedisClient, RedisStore } from "@effect-idempotency/redis"
import * as StoreSpans from "@effect-idempotency/test-support/StoreSpans"
import { assert, layer } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { clientLayer, expectReserved, freshId, reserveRequest, uniquePrefix } from "./utils/fixtures.js"

const { recording } = StoreSpans

/** Every method once, inside a span named `caller`. */
const everyMethod = (store: IdempotencyStore.IdempotencyStore["Type"]) =>
  Effect.gen(function*() {
    const id = freshId()
    const request = reserveRequest(id)
    const token = expectReserved(yield* store.reserve(request)).token
    yield* store.reserve({ ...request, token: "token-2" })
    yield* store.extend({ id, token, lease: Duration.seconds(30) })
    yield* store.markFailed({ id, token, ttl: Duration.hours(1) })
    const again = expectReserved(yield* store.reserve(request)).token
    yield* store.complete({
      id,
      token: again,
      outcome: IdempotencyRecord.StoredOutcome.Timeout(),
      ttl: Duration.hours(1)
    })
    yield* Effect.flip(store.release({ id, token }))
    yield* store.get(id)
    yield* store.purgeExpired({ limit: 1 })
  }).pipe(Effect.withSpan("caller"))

const storeWith = (spans: boolean | undefined) =>
  Effect.map(
    Effect.flatMap(RedisClient.RedisClient, ({ client }) =>
      Layer.build(
        RedisStore.layerWith({ prefix: uniquePrefix("tracing"), clock: "effect", spans }).pipe(
          Layer.provide(RedisClient.layerFromClient(client))
        )
      )),
    (context) => Context.get(context, IdempotencyStore.IdempotencyStore)
  )

layer(clientLayer(), { timeout: "1 minute" })("RedisStore tracing", (it) => {
  it.scoped("by default the store starts no span of its own", () =>
    Effect.gen(function*() {
      const { spans, tracer } = yield* recording
      const store = yield* storeWith(undefined)
      yield* everyMethod(store).pipe(Effect.withTracer(tracer))
      assert.deepStrictEqual(spans.map(({ span }) => span.name), ["caller"])
    }))

  it.scoped("with spans: true, every store call is one span, a child of the caller's", () =>
    Effect.gen(function*() {
      const { spans, tracer } = yield* recording
      const store = yield* storeWith(true)
      yield* everyMethod(store).pipe(Effect.withTracer(tracer))
      const names = [
        "reserve",
        "reserve",
        "extend",
        "markFailed",
        "reserve",
        "complete",
        "release",
        "get",
        "purgeExpired"
      ]
      assert.deepStrictEqual(spans.map(({ span }) => span.name), ["caller", ...names.map((m) => `RedisStore.${m}`)])
      for (const { parent, span } of spans.slice(1)) {
        assert.strictEqual(parent, "caller", span.name)
        assert.strictEqual(span.attributes.get("db.system"), "redis", span.name)
        assert.strictEqual(span.status._tag, "Ended", span.name)
      }
    }))
})
