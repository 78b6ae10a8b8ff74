import { Idempotency, IdempotencyContext, IdempotencyStore } from "@effect-idempotency/core"
import { IdempotencyHttpClient } from "@effect-idempotency/platform"
import * as HttpClient from "@effect/platform/HttpClient"
import type * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Ref from "effect/Ref"
import * as Schema from "effect/Schema"

class Transient extends Schema.TaggedError<Transient>()("Transient", {}) {}

/**
 * A client that answers 200 to everything and keeps the requests it was asked to send, and
 * `forwarding`, the client with the key forwarded.
 */
const recordingClient = Effect.map(Ref.make<ReadonlyArray<HttpClientRequest.HttpClientRequest>>([]), (sent) => {
  const client = HttpClient.make((request) =>
    Effect.as(
      Ref.update(sent, (all) => [...all, request]),
      HttpClientResponse.fromWeb(request, new Response("ok"))
    )
  )
  return { sent, client, forwarding: IdempotencyHttpClient.forwardKey(client) }
})

const keysOf = (sent: Ref.Ref<ReadonlyArray<HttpClientRequest.HttpClientRequest>>) =>
  Effect.map(Ref.get(sent), (all) => all.map((request): string | undefined => request.headers["idempotency-key"]))

const Payload = Schema.Struct({ sku: Schema.String })

/** An operation from `Payload` to a string. */
const stringOperation = <E, R>(name: string, execute: () => Effect.Effect<string, E, R>) =>
  Idempotency.make({ name, payload: Payload, success: Schema.String, execute })
const store = IdempotencyStore.layerMemoryWith({ warn: false })

describe("IdempotencyHttpClient", () => {
  it.effect("sets the step key of the current attempt on a request inside an operation", () =>
    Effect.gen(function*() {
      const { forwarding, sent } = yield* recordingClient
      let expected = ""
      const operation = stringOperation("create-order", () =>
        Effect.gen(function*() {
          expected = yield* IdempotencyContext.stepKey("create")
          yield* forwarding.post("http://127.0.0.1:1/orders")
          return "done"
        }).pipe(IdempotencyHttpClient.withStep("create")))
      yield* operation.run({ key: "client-key-1", payload: { sku: "A" } })
      const keys = yield* keysOf(sent)
      assert.deepStrictEqual(keys, [expected])
      // pinned: printf 'create-order#client-key-1\0create' | openssl dgst -sha256 -binary | base64url
      assert.strictEqual(expected, "WFmwx_erjshJszQIkr-lKRMFwn1Na48WK0T4FwVn7j4")
    }).pipe(Effect.provide(store)))

  it.effect("sends the same key when a retry of the request runs the operation again", () =>
    Effect.gen(function*() {
      const { client, sent } = yield* recordingClient
      const forwarding = client.pipe(IdempotencyHttpClient.forwardKey())
      const executions = yield* Ref.make(0)
      const operation = Idempotency.make({
        name: "create-order",
        payload: Payload,
        success: Schema.String,
        // the first execution fails after its request went out; `release` lets the retry execute
        execute: () =>
          Effect.gen(function*() {
            yield* forwarding.post("http://127.0.0.1:1/orders")
            const n = yield* Ref.updateAndGet(executions, (k) => k + 1)
            if (n === 1) return yield* new Transient()
            return "done"
          }),
        onFailure: () => "release"
      })
      const first = yield* Effect.flip(operation.run({ key: "retried-key", payload: { sku: "A" } }))
      assert.strictEqual(first._tag, "Transient")
      yield* operation.run({ key: "retried-key", payload: { sku: "A" } })
      const keys = yield* keysOf(sent)
      assert.strictEqual(keys.length, 2)
      assert.isString(keys[0])
      assert.strictEqual(keys[0], keys[1])
      // and it is the key derived from the record id and the request line, stable across processes
      // and versions (pinned: printf 'create-order#retried-key\0POST http://127.0.0.1:1/orders' |
      // openssl dgst -sha256 -binary | base64url)
      assert.strictEqual(keys[0], "lPAuP3fkLAkfyf3i2b8kvsU1lj1aFdpbTHyAkyiYD1I")
    }).pipe(Effect.provide(store)))

  it.effect("derives a different key per step, per URL, per client key and per scope", () =>
    Effect.gen(function*() {
      const { forwarding, sent } = yield* recordingClient
      const operation = stringOperation("checkout", () =>
        Effect.gen(function*() {
          yield* forwarding.post("http://127.0.0.1:1/charges").pipe(IdempotencyHttpClient.withStep("charge"))
          yield* forwarding.post("http://127.0.0.1:1/charges").pipe(IdempotencyHttpClient.withStep("refund-fee"))
          yield* forwarding.post("http://127.0.0.1:1/orders")
          yield* forwarding.post("http://127.0.0.1:1/shipments")
          return "done"
        }))
      yield* operation.run({ key: "k-1", payload: { sku: "A" } })
      yield* operation.run({ key: "k-2", payload: { sku: "A" } })
      yield* operation.run({ key: "k-1", payload: { sku: "A" }, scope: "tenant-b" })
      const keys = yield* keysOf(sent)
      assert.strictEqual(keys.length, 12)
      assert.strictEqual(new Set(keys).size, 12)
    }).pipe(Effect.provide(store)))

  it.effect("leaves requests outside an operation untouched", () =>
    Effect.gen(function*() {
      const { forwarding, sent } = yield* recordingClient
      yield* forwarding.post("http://127.0.0.1:1/orders")
      yield* forwarding.post("http://127.0.0.1:1/orders").pipe(IdempotencyHttpClient.withStep("named"))
      assert.deepStrictEqual(yield* keysOf(sent), [undefined, undefined])
    }))

  it.effect("keys mutating methods only, keeps a key the caller set, and can quote it", () =>
    Effect.gen(function*() {
      const { client, forwarding, sent } = yield* recordingClient
      const quoted = client.pipe(IdempotencyHttpClient.forwardKey({ quoted: true, header: "X-Request-Key" }))
      let stepKey = ""
      const operation = stringOperation("methods", () =>
        Effect.gen(function*() {
          yield* forwarding.get("http://127.0.0.1:1/orders")
          yield* forwarding.post("http://127.0.0.1:1/orders", { headers: { "Idempotency-Key": "callers-own" } })
          stepKey = yield* IdempotencyContext.stepKey("POST http://127.0.0.1:1/orders")
          yield* quoted.post("http://127.0.0.1:1/orders")
          return "done"
        }))
      yield* operation.run({ key: "k-methods", payload: { sku: "A" } })
      const all = yield* Ref.get(sent)
      assert.strictEqual(all[0].headers["idempotency-key"], undefined)
      assert.strictEqual(all[1].headers["idempotency-key"], "callers-own")
      assert.strictEqual(all[2].headers["x-request-key"], `"${stepKey}"`)
      assert.strictEqual(all[2].headers["idempotency-key"], undefined)
    }).pipe(Effect.provide(store)))

  it.effect("layer replaces the HttpClient service with a forwarding one", () =>
    Effect.gen(function*() {
      const { client, sent } = yield* recordingClient
      const operation = stringOperation(
        "layered",
        () => Effect.as(HttpClient.post("http://127.0.0.1:1/orders"), "done")
      )
      const layer = IdempotencyHttpClient.layer.pipe(Layer.provide(Layer.succeed(HttpClient.HttpClient, client)))
      yield* operation.run({ key: "k-layer", payload: { sku: "A" } }).pipe(Effect.provide(layer))
      const [key] = yield* keysOf(sent)
      assert.isString(key)
      assert.notStrictEqual(key, "k-layer")
    }).pipe(Effect.provide(store)))
})
