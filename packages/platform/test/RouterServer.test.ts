/**
 * `IdempotencyMiddleware` on `HttpRouter` routes of a real server (`NodeHttpServer` on loopback),
 * called with a real `HttpClient`, on the PostgreSQL server and on DynamoDB Local: every status of
 * the draft, a byte-identical replay, 100 concurrent identical requests that run the handler once,
 * and a store taken down (503, the handler not called).
 */
import { IdempotencyMiddleware } from "@effect-idempotency/platform"
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { assert, layer } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import { randomBytes, randomUUID } from "node:crypto"
import type { Backend } from "./utils/backends.js"
import { backends, servedOn } from "./utils/backends.js"
import type { ServerEnv } from "./utils/serverCases.js"
import { assertSameResponse, Executions, order, ordersCases, problem, serverTest } from "./utils/serverCases.js"

/** What the routes did, by route and key, and the latches that hold `/slow` by key. */
class Routes extends Executions {
  readonly latches = new Map<string, { started: Deferred.Deferred<void>; release: Deferred.Deferred<void> }>()
}

class TestError {
  readonly _tag = "TestError"
}

const makeApp = (routes: Routes) => {
  const idempotent = IdempotencyMiddleware.make({
    name: "router",
    scope: (request) => Effect.succeed(request.headers["x-tenant"]),
    maxBodyBytes: 64 * 1024,
    maxResponseBytes: 16 * 1024,
    timeLimit: "6 seconds"
  })
  const timingOut = IdempotencyMiddleware.make({
    name: "router-timeout",
    timeout: "300 millis",
    onTimeout: "markUnknown"
  })
  const request = HttpServerRequest.HttpServerRequest
  return HttpRouter.empty.pipe(
    HttpRouter.post(
      "/orders",
      Effect.gen(function*() {
        const req = yield* request
        const n = routes.count("orders", req)
        const order = yield* req.json
        yield* Effect.sleep("20 millis")
        const response = yield* HttpServerResponse.json({ orderId: `ord-${randomUUID()}`, n, order }, {
          status: 201,
          headers: { location: "/orders/1", "x-trace": randomUUID() }
        })
        return HttpServerResponse.unsafeSetCookie(response, "session", "abc")
      }).pipe(idempotent)
    ),
    HttpRouter.get("/orders", Effect.map(request, (req) => HttpServerResponse.text(String(routes.count("list", req))))),
    HttpRouter.post(
      "/notes",
      Effect.map(request, (req) => HttpServerResponse.text(String(routes.count("notes", req)), { status: 201 }))
    ),
    HttpRouter.post(
      "/files",
      Effect.map(request, (req) => {
        routes.count("files", req)
        const bytes = new Uint8Array(randomBytes(8 * 1024))
        bytes[0] = 0xff
        return HttpServerResponse.uint8Array(bytes, { contentType: "application/octet-stream" })
      }).pipe(idempotent)
    ),
    HttpRouter.post(
      "/slow",
      Effect.gen(function*() {
        const req = yield* request
        routes.count("slow", req)
        const latch = routes.latches.get(req.headers["idempotency-key"] ?? "")
        if (latch !== undefined) {
          yield* Deferred.succeed(latch.started, undefined)
          yield* Deferred.await(latch.release)
        }
        return HttpServerResponse.text("done", { status: 201 })
      }).pipe(idempotent)
    ),
    HttpRouter.post(
      "/flaky",
      Effect.map(request, (req) =>
        routes.count("flaky", req) === 1
          ? HttpServerResponse.text("down", { status: 503 })
          : HttpServerResponse.text("up", { status: 201 })).pipe(idempotent)
    ),
    HttpRouter.post(
      "/reject",
      Effect.flatMap(request, (req) => {
        routes.count("reject", req)
        return HttpServerResponse.json({ error: "out of stock", id: randomUUID() }, { status: 409 })
      }).pipe(idempotent)
    ),
    HttpRouter.post(
      "/fails",
      Effect.flatMap(request, (req) =>
        routes.count("fails", req) === 1
          ? Effect.fail(new TestError())
          : Effect.succeed(HttpServerResponse.text("ok", { status: 201 }))).pipe(idempotent)
    ),
    HttpRouter.post(
      "/large",
      Effect.map(request, (req) => {
        routes.count("large", req)
        const bytes = new Uint8Array(randomBytes(64 * 1024))
        const chunks = Array.from({ length: 16 }, (_, i) => bytes.slice(i * 4096, (i + 1) * 4096))
        return HttpServerResponse.stream(Stream.fromIterable(chunks), { contentType: "application/octet-stream" })
          .pipe(HttpServerResponse.setHeader("x-sha", Buffer.from(bytes).toString("base64").slice(0, 16)))
      }).pipe(idempotent)
    ),
    HttpRouter.post(
      "/timeout",
      Effect.flatMap(request, (req) => {
        routes.count("timeout", req)
        return Effect.as(Effect.sleep("5 seconds"), HttpServerResponse.text("late"))
      }).pipe(timingOut)
    ),
    HttpRouter.catchAll(() => Effect.succeed(HttpServerResponse.text("the handler failed", { status: 500 })))
  )
}

class Env extends Context.Tag("test/RouterServer/Env")<Env, ServerEnv<{ readonly routes: Routes }>>() {}

const envLayer = (backend: Backend) =>
  Layer.scoped(
    Env,
    Effect.suspend(() => {
      const routes = new Routes()
      return Effect.map(
        servedOn(backend, (context) => Effect.succeed(Effect.provide(makeApp(routes), context))),
        (server) => ({ ...server, routes })
      )
    })
  )

for (const backend of backends) {
  layer(envLayer(backend), { excludeTestServices: true, timeout: "120 seconds" })(
    `IdempotencyMiddleware on HttpRouter, ${backend.name}`,
    (it) => {
      const test = serverTest(it, Env)

      test(
        "the first POST runs; a retry gets its status, allowed headers and bytes with the replay header",
        function*({ client, routes }, key) {
          const first = yield* client.send("POST", "/orders", { key, body: order })
          assert.strictEqual(first.status, 201)
          assert.isUndefined(first.headers["idempotent-replayed"])
          assert.strictEqual(first.headers["set-cookie"], "session=abc")
          assert.isDefined(first.headers["x-trace"])
          for (const sent of [key, `"${key}"`]) {
            const replay = yield* client.send("POST", "/orders", { key: sent, body: order })
            assertSameResponse(replay, first, ["content-type", "location"])
            // outside the allow-list: the fresh response only
            assert.isUndefined(replay.headers["set-cookie"])
            assert.isUndefined(replay.headers["x-trace"])
          }
          assert.strictEqual(routes.runs("orders", key), 1)
        }
      )

      test("a binary body is replayed byte-identical", function*({ client, routes }, key) {
        const first = yield* client.send("POST", "/files", { key, body: order })
        const replay = yield* client.send("POST", "/files", { key, body: order })
        assert.strictEqual(first.bytes.byteLength, 8 * 1024)
        assertSameResponse(replay, first, ["content-type"])
        assert.strictEqual(routes.runs("files", key), 1)
      })

      test("other methods and other routes are untouched", function*({ client, routes }, key) {
        assert.strictEqual((yield* client.send("GET", "/orders", { key })).status, 200)
        assert.strictEqual((yield* client.send("GET", "/orders", { key })).status, 200)
        assert.strictEqual(routes.runs("list", key), 2)
        assert.strictEqual((yield* client.send("POST", "/notes", { body: order })).status, 201)
        assert.strictEqual((yield* client.send("POST", "/notes", { body: order })).status, 201)
        assert.strictEqual(routes.runs("notes", ""), 2)
      })

      test("400 problems for a missing or invalid key; the handler does not run", function*({ client, routes }) {
        const missing = yield* client.send("POST", "/orders", { body: order })
        assert.strictEqual(missing.status, 400)
        assert.strictEqual(missing.headers["content-type"], "application/problem+json")
        assert.include(problem(missing).detail, "Idempotency-Key")
        const invalid = yield* client.send("POST", "/orders", { key: "two words", body: order })
        assert.strictEqual(invalid.status, 400)
        assert.strictEqual(problem(invalid).status, 400)
        assert.strictEqual(routes.runs("orders", ""), 0)
        assert.strictEqual(routes.runs("orders", "two words"), 0)
      })

      test(
        "409 with Retry-After while the first request runs; then its response is replayed",
        function*({ client, routes }, key) {
          const latch = { started: yield* Deferred.make<void>(), release: yield* Deferred.make<void>() }
          routes.latches.set(key, latch)
          const first = yield* Effect.fork(client.send("POST", "/slow", { key, body: order }))
          yield* Deferred.await(latch.started)
          const conflict = yield* client.send("POST", "/slow", { key, body: order })
          assert.strictEqual(conflict.status, 409)
          assert.strictEqual(conflict.headers["content-type"], "application/problem+json")
          const retryAfter = Number(conflict.headers["retry-after"])
          assert.isTrue(retryAfter >= 1 && retryAfter <= 6, String(retryAfter))
          yield* Deferred.succeed(latch.release, undefined)
          assert.strictEqual((yield* Fiber.join(first)).status, 201)
          const replay = yield* client.send("POST", "/slow", { key, body: order })
          assert.deepStrictEqual([replay.status, replay.headers["idempotent-replayed"]], [201, "true"])
          assert.strictEqual(routes.runs("slow", key), 1)
        }
      )

      test(
        "a client that goes away does not stop the request: its retry gets the recorded response",
        function*({ client, routes }, key) {
          const latch = { started: yield* Deferred.make<void>(), release: yield* Deferred.make<void>() }
          routes.latches.set(key, latch)
          const first = yield* Effect.fork(client.send("POST", "/slow", { key, body: order }))
          yield* Deferred.await(latch.started)
          // the client gives up: its connection closes while the handler runs
          yield* Fiber.interrupt(first)
          yield* Deferred.succeed(latch.release, undefined)
          // 409 until the abandoned request has recorded its response
          const retry = yield* client.send("POST", "/slow", { key, body: order }).pipe(
            Effect.filterOrFail((reply) => reply.status !== 409),
            Effect.retry({ schedule: Schedule.spaced("50 millis"), times: 40 })
          )
          assert.deepStrictEqual([retry.status, retry.headers["idempotent-replayed"]], [201, "true"])
          assert.strictEqual(routes.runs("slow", key), 1)
        }
      )

      test(
        "422 for the key with another body or on another route of the same middleware",
        function*({ client, routes }, key) {
          yield* client.send("POST", "/orders", { key, body: order })
          const reused = yield* client.send("POST", "/orders", {
            key,
            body: JSON.stringify({ sku: "B-2", quantity: 1 })
          })
          assert.strictEqual(reused.status, 422)
          assert.strictEqual(problem(reused).title, "Unprocessable Content")
          const otherRoute = yield* client.send("POST", "/files", { key, body: order })
          assert.strictEqual(otherRoute.status, 422)
          assert.strictEqual(routes.runs("orders", key), 1)
          assert.strictEqual(routes.runs("files", key), 0)
        }
      )

      test(
        "413 past maxBodyBytes, without echoing the body; the handler does not run",
        function*({ client, routes }, key) {
          const reply = yield* client.send("POST", "/orders", {
            key,
            body: JSON.stringify({ secret: "sk_live_" + "x".repeat(100 * 1024) })
          })
          assert.strictEqual(reply.status, 413)
          assert.isBelow(reply.text.length, 300)
          assert.notInclude(reply.text, "sk_live")
          // without a content length: read to its end and discarded, and answered on the connection
          const chunked = yield* client.send("POST", "/orders", {
            key,
            chunked: true,
            body: JSON.stringify({ secret: "sk_live_" + "x".repeat(100 * 1024) })
          })
          assert.strictEqual(chunked.status, 413)
          assert.notInclude(chunked.text, "sk_live")
          assert.strictEqual(routes.runs("orders", key), 0)
          // a chunked body within the limit is the same request as with a content length
          const first = yield* client.send("POST", "/orders", { key, body: order, chunked: true })
          assert.strictEqual(first.status, 201)
          assertSameResponse(yield* client.send("POST", "/orders", { key, body: order }), first, ["content-type"])
        }
      )

      test(
        "a 5xx is not recorded and a retry runs again; a 4xx is recorded and replayed",
        function*({ client, routes }, key) {
          assert.strictEqual((yield* client.send("POST", "/flaky", { key, body: order })).status, 503)
          const retry = yield* client.send("POST", "/flaky", { key, body: order })
          assert.deepStrictEqual([retry.status, retry.headers["idempotent-replayed"]], [201, undefined])
          const replay = yield* client.send("POST", "/flaky", { key, body: order })
          assert.deepStrictEqual([replay.status, replay.headers["idempotent-replayed"]], [201, "true"])
          assert.strictEqual(routes.runs("flaky", key), 2)

          const rejectKey = randomUUID()
          const rejected = yield* client.send("POST", "/reject", { key: rejectKey, body: order })
          const again = yield* client.send("POST", "/reject", { key: rejectKey, body: order })
          assert.strictEqual(rejected.status, 409)
          assertSameResponse(again, rejected, ["content-type"])
          assert.strictEqual(routes.runs("reject", rejectKey), 1)
        }
      )

      test("a failure of the handler releases the key: the retry runs again", function*({ client, routes }, key) {
        assert.strictEqual((yield* client.send("POST", "/fails", { key, body: order })).status, 500)
        assert.strictEqual((yield* client.send("POST", "/fails", { key, body: order })).status, 201)
        assert.strictEqual(routes.runs("fails", key), 2)
      })

      test(
        "a response larger than the store keeps is answered whole once; retries get 500, no second run",
        function*({ client, routes }, key) {
          const first = yield* client.send("POST", "/large", { key, body: order })
          assert.strictEqual(first.status, 200)
          assert.strictEqual(first.bytes.byteLength, 64 * 1024)
          assert.strictEqual(Buffer.from(first.bytes).toString("base64").slice(0, 16), first.headers["x-sha"])
          const retry = yield* client.send("POST", "/large", { key, body: order })
          assert.strictEqual(retry.status, 500)
          assert.strictEqual(retry.headers["idempotent-replayed"], "true")
          assert.strictEqual(routes.runs("large", key), 1)
        }
      )

      test(
        "504 when the handler outlives its timeout; markUnknown replays it without running again",
        function*({ client, routes }, key) {
          const first = yield* client.send("POST", "/timeout", { key, body: order })
          assert.strictEqual(first.status, 504)
          assert.isUndefined(first.headers["idempotent-replayed"])
          const retry = yield* client.send("POST", "/timeout", { key, body: order })
          assert.deepStrictEqual([retry.status, retry.headers["idempotent-replayed"]], [504, "true"])
          assert.strictEqual(routes.runs("timeout", key), 1)
        }
      )

      ordersCases(
        it,
        Effect.map(Env, ({ client, proxy, routes }) => ({
          client,
          proxy,
          runs: (key: string, tenant?: string) => routes.runs("orders", key, tenant)
        })),
        ["content-type", "location"]
      )
    }
  )
}
