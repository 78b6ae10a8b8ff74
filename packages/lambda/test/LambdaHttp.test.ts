/**
 * HTTP events (API Gateway REST payload 1.0, HTTP API and function URL payload 2.0) through the
 * shared HTTP implementation, invoked by the Lambda-like runner: statuses, replays, binary bodies,
 * cookies, and the seed scenario (a downstream that answers after the function's timeout) on the
 * real stores.
 */
import { IdempotencyContext, IdempotencyStore } from "@effect-idempotency/core"
import { LambdaHttp, LambdaTest } from "@effect-idempotency/lambda"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { dispose, initialized, invoke, liveTest, makeDownstream, slowMemoryStore } from "./utils/LambdaRunner.js"
import { realStores } from "./utils/stores.js"

const v2 = (body: string, headers: Record<string, string>, options: { readonly base64?: boolean } = {}) =>
  LambdaTest.httpApiEvent({
    method: "POST",
    path: "/orders",
    headers: { "content-type": "application/json", ...headers },
    cookies: ["session=abc"],
    body: options.base64 === true ? new TextEncoder().encode(body) : body
  })

const v1 = (body: string, headers: Record<string, string>) =>
  LambdaTest.restApiEvent({
    method: "POST",
    path: "/orders?source=web",
    headers: { "Content-Type": "application/json", ...headers },
    body
  })

for (const store of realStores) {
  describe(`LambdaHttp on ${store.name}`, () => {
    it.live(
      "REST and HTTP API events: 201, a byte-identical replay, 422, 400; cookies and binary bodies",
      () =>
        Effect.gen(function*() {
          const downstream = makeDownstream({ deduplicate: false })
          const handler = yield* initialized(LambdaHttp.idempotent({
            name: "orders",
            layer: store.layer(),
            handler: (request) =>
              Effect.gen(function*() {
                const order = (yield* Effect.promise(() => request.json())) as { readonly sku: string }
                yield* downstream.write(order.sku, undefined)
                const headers = new Headers({ "content-type": "application/json", location: `/orders/${order.sku}` })
                headers.append("set-cookie", "seen=1")
                return new Response(JSON.stringify({ sku: order.sku, cookie: request.headers.get("cookie") }), {
                  status: 201,
                  headers
                })
              })
          }))
          const body = JSON.stringify({ sku: "A-1" })
          const first = yield* invoke(handler, v2(body, { "idempotency-key": "k-1" }), "3 seconds")
          const replay = yield* invoke(handler, v2(body, { "idempotency-key": "k-1" }, { base64: true }), "3 seconds")
          if (first._tag !== "Ok" || replay._tag !== "Ok") return assert.fail(`${first._tag} ${replay._tag}`)
          const [a, b] = [
            first.value as { body: string; statusCode: number; headers: Record<string, string> },
            replay.value as { body: string; statusCode: number; headers: Record<string, string> }
          ]
          assert.deepStrictEqual([a.statusCode, b.statusCode], [201, 201])
          assert.strictEqual(b.body, a.body)
          assert.strictEqual(b.headers["idempotent-replayed"], "true")
          assert.strictEqual(b.headers.location, "/orders/A-1")
          assert.deepStrictEqual(JSON.parse(a.body), { sku: "A-1", cookie: "session=abc" })
          assert.deepStrictEqual((first.value as { cookies?: ReadonlyArray<string> }).cookies, ["seen=1"])

          const reused = yield* invoke(
            handler,
            v2(JSON.stringify({ sku: "B-2" }), { "idempotency-key": "k-1" }),
            "3 seconds"
          )
          assert.strictEqual(reused._tag === "Ok" && reused.value.statusCode, 422)
          const missing = yield* invoke(handler, v1(body, {}), "3 seconds")
          assert.strictEqual(missing._tag === "Ok" && missing.value.statusCode, 400)
          const rest = yield* invoke(
            handler,
            v1(JSON.stringify({ sku: "C-3" }), { "Idempotency-Key": "k-2" }),
            "3 seconds"
          )
          assert.strictEqual(rest._tag === "Ok" && rest.value.statusCode, 201)
          assert.deepStrictEqual(
            rest._tag === "Ok" &&
              (rest.value as { multiValueHeaders?: Record<string, ReadonlyArray<string>> }).multiValueHeaders,
            { "set-cookie": ["seen=1"] }
          )
          assert.deepStrictEqual(Array.from(downstream.writes.entries()), [["A-1", 1], ["C-3", 1]])
          yield* dispose(handler)
        }),
      60_000
    )

    it.live(
      "the seed scenario through an HTTP API: a timeout after the write, retried: one write",
      () =>
        Effect.gen(function*() {
          const downstream = makeDownstream({ deduplicate: true })
          let calls = 0
          const handler = yield* initialized(LambdaHttp.idempotent({
            name: "orders",
            layer: store.layer(),
            handler: (request) =>
              Effect.gen(function*() {
                const key = Option.getOrThrow(yield* IdempotencyContext.current).stepKey("orders")
                const order = (yield* Effect.promise(() => request.json())) as { readonly sku: string }
                const r = yield* downstream.write(order.sku, key, calls++ === 0 ? "4 seconds" : 0)
                return Response.json({ sku: order.sku, downstreamReplayed: r.replayed }, { status: 201 })
              })
          }))
          // HTTP invocations are synchronous: the client retries a 504 or a 409, after a while
          const statuses: Array<number | string> = []
          for (let attempt = 0; attempt < 4; attempt++) {
            if (attempt > 0) yield* Effect.sleep("3 seconds")
            const result = yield* invoke(
              handler,
              v2(JSON.stringify({ sku: "BOOK-42" }), { "idempotency-key": "seed" }),
              "2500 millis"
            )
            statuses.push(result._tag === "Ok" ? result.value.statusCode ?? 200 : result._tag)
            if (result._tag === "Ok" && result.value.statusCode === 201) break
          }
          // the first answered 504 before the cut-off (the lease is kept); a retry after the lease
          // took over, sent the same key, and recorded the downstream's original answer
          assert.strictEqual(statuses[0], 504)
          assert.strictEqual(statuses[statuses.length - 1], 201)
          assert.strictEqual(downstream.total(), 1)
          yield* dispose(handler)
        }),
      60_000
    )
  })
}

describe("LambdaHttp's cut-off", () => {
  liveTest("a cold start counts against the remaining time once", function*() {
    // of the invocation's 2 s, building the runtime takes 600 ms and the handler 700 ms: it ends
    // 400 ms before the 300 ms margin, where counting the start twice would cut it off at 1.1 s
    const handler = LambdaHttp.idempotent({
      name: "cold",
      layer: slowMemoryStore("600 millis"),
      margin: "300 millis",
      handler: () => Effect.as(Effect.sleep("700 millis"), Response.json({ ok: true }, { status: 201 }))
    })
    const result = yield* invoke(handler, v2("{}", { "idempotency-key": "cold-1" }), "2 seconds")
    assert.strictEqual(result._tag === "Ok" ? result.value.statusCode : result._tag, 201)
    yield* dispose(handler)
  })

  liveTest(
    "a cold start longer than the invocation: 503 before the cut-off, nothing run; the build goes on",
    function*() {
      // building the runtime takes 1.5 s of the invocation's 1 s: the first invocation answers 503
      // before Lambda stops it, and the second, 1.2 s later, finds the runtime built and executes
      let builds = 0
      let runs = 0
      const handler = LambdaHttp.idempotent({
        name: "cold",
        layer: slowMemoryStore("1500 millis", () => builds++),
        margin: "200 millis",
        handler: () => Effect.sync(() => Response.json({ run: ++runs }, { status: 201 }))
      })
      const cold = yield* invoke(handler, v2("{}", { "idempotency-key": "cold-2" }), "1 second")
      assert.strictEqual(cold._tag === "Ok" ? cold.value.statusCode : cold._tag, 503)
      assert.strictEqual(runs, 0)
      yield* Effect.sleep("1200 millis")
      const warm = yield* invoke(handler, v2("{}", { "idempotency-key": "cold-2" }), "1 second")
      assert.strictEqual(warm._tag === "Ok" ? warm.value.statusCode : warm._tag, 201)
      assert.deepStrictEqual([runs, builds], [1, 1])
      yield* dispose(handler)
    }
  )

  liveTest("ready() builds the runtime before the first invocation, which then has its whole time", function*() {
    const handler = LambdaHttp.idempotent({
      name: "init",
      layer: slowMemoryStore("1500 millis"),
      margin: "200 millis",
      handler: () => Effect.succeed(Response.json({ ok: true }, { status: 201 }))
    })
    yield* Effect.promise(() => handler.ready())
    const result = yield* invoke(handler, v2("{}", { "idempotency-key": "init-1" }), "1 second")
    assert.strictEqual(result._tag === "Ok" ? result.value.statusCode : result._tag, 201)
    yield* dispose(handler)
  })
})

describe("LambdaHttp's results", () => {
  liveTest("a body past maxBodyBytes gets 413, without the Connection header of a Web server's answer", function*() {
    const handler = LambdaHttp.idempotent({
      name: "large",
      layer: IdempotencyStore.layerMemoryWith({ warn: false }),
      maxBodyBytes: 1024,
      handler: () => Effect.succeed(Response.json({ ok: true }, { status: 201 }))
    })
    const body = JSON.stringify({ note: "x".repeat(4096) })
    const result = yield* invoke(handler, v2(body, { "idempotency-key": "large-1" }), "2 seconds")
    if (result._tag !== "Ok") return assert.fail(result._tag)
    const value = result.value as { statusCode: number; headers: Record<string, string> }
    assert.strictEqual(value.statusCode, 413)
    assert.strictEqual(value.headers["content-type"], "application/problem+json")
    assert.isUndefined(value.headers.connection)
    yield* dispose(handler)
  })
})
