/**
 * `IdempotencyHttpApi` on an `HttpApi` served by a real server (`NodeHttpServer` on loopback),
 * called with a real `HttpClient`, on the PostgreSQL server and on DynamoDB Local; and the OpenAPI
 * document of an idempotent endpoint.
 */
import { IdempotencyStore } from "@effect-idempotency/core"
import { IdempotencyHttpApi } from "@effect-idempotency/platform"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as HttpApp from "@effect/platform/HttpApp"
import * as OpenApi from "@effect/platform/OpenApi"
import { assert, describe, it, layer } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { randomUUID } from "node:crypto"
import type { Backend } from "./utils/backends.js"
import { backends, servedOn } from "./utils/backends.js"
import type { ServerEnv } from "./utils/serverCases.js"
import { assertSameResponse, Executions, order, ordersCases, problem, serverTest } from "./utils/serverCases.js"

class OutOfStock extends Schema.TaggedError<OutOfStock>()(
  "OutOfStock",
  { sku: Schema.String },
  HttpApiSchema.annotations({ status: 409 })
) {}

const NewOrder = Schema.Struct({ sku: Schema.String, quantity: Schema.Int })
const Order = Schema.Struct({ orderId: Schema.String, sku: Schema.String, quantity: Schema.Int })

class Orders extends HttpApiGroup.make("orders")
  .add(
    HttpApiEndpoint.post("create", "/orders")
      .setPayload(NewOrder)
      .addSuccess(Order, { status: 201 })
      .addError(OutOfStock)
      .pipe(IdempotencyHttpApi.idempotent())
  )
  .add(
    HttpApiEndpoint.patch("update", "/orders/:id")
      .setPath(Schema.Struct({ id: Schema.String }))
      .setPayload(NewOrder)
      .addSuccess(Order)
      .pipe(IdempotencyHttpApi.idempotent({ required: false }))
  )
  .add(HttpApiEndpoint.post("note", "/orders/notes").setPayload(NewOrder).addSuccess(Schema.Struct({ n: Schema.Int })))
  .add(HttpApiEndpoint.get("get", "/orders/:id").setPath(Schema.Struct({ id: Schema.String })).addSuccess(Order))
{}

class Api extends HttpApi.make("shop").add(Orders) {}

const ordersLive = (calls: Executions) =>
  HttpApiBuilder.group(Api, "orders", (handlers) =>
    handlers
      .handle("create", ({ payload, request }) =>
        Effect.gen(function*() {
          calls.count("create", request)
          yield* Effect.sleep("20 millis")
          if (payload.sku === "SOLD-OUT") return yield* new OutOfStock({ sku: payload.sku })
          return { orderId: `ord-${randomUUID()}`, ...payload }
        }))
      .handle("update", ({ path, payload, request }) =>
        Effect.sync(() => {
          calls.count("update", request)
          return { orderId: path.id, ...payload }
        }))
      .handle("note", ({ request }) => Effect.sync(() => ({ n: calls.count("note", request) })))
      .handle("get", ({ path }) => Effect.succeed({ orderId: path.id, sku: "A-1", quantity: 1 })))

class Env extends Context.Tag("test/HttpApiServer/Env")<Env, ServerEnv<{ readonly calls: Executions }>>() {}

const envLayer = (backend: Backend) =>
  Layer.scoped(
    Env,
    Effect.suspend(() => {
      const calls = new Executions()
      const app = (context: Context.Context<IdempotencyStore.IdempotencyStore>) => {
        const ApiLive = HttpApiBuilder.api(Api).pipe(
          Layer.provide(ordersLive(calls)),
          Layer.provide(IdempotencyHttpApi.layer(Api, {
            scope: (request) => Effect.succeed(request.headers["x-tenant"]),
            timeLimit: "6 seconds"
          })),
          Layer.provide(Layer.succeedContext(context))
        )
        return HttpApiBuilder.httpApp.pipe(
          Effect.provide(Layer.mergeAll(ApiLive, HttpApiBuilder.Router.Live, HttpApiBuilder.Middleware.layer)),
          Effect.map((app) => Effect.provide(app, NodeHttpServer.layerContext))
        )
      }
      return Effect.map(servedOn(backend, app), (server) => ({ ...server, calls }))
    })
  )

for (const backend of backends) {
  layer(envLayer(backend), { excludeTestServices: true, timeout: "120 seconds" })(
    `IdempotencyHttpApi, ${backend.name}`,
    (it) => {
      const test = serverTest(it, Env)

      test(
        "an idempotent endpoint runs once; a retry gets the same response with the replay header",
        function*({ calls, client }, key) {
          const first = yield* client.send("POST", "/orders", { key, body: order })
          assert.strictEqual(first.status, 201)
          assert.isUndefined(first.headers["idempotent-replayed"])
          assertSameResponse(yield* client.send("POST", "/orders", { key, body: order }), first)
          assert.strictEqual(calls.runs("create", key), 1)
        }
      )

      test(
        "a declared domain failure is answered with its status, recorded, and replayed",
        function*({ calls, client }, key) {
          const body = JSON.stringify({ sku: "SOLD-OUT", quantity: 1 })
          const first = yield* client.send("POST", "/orders", { key, body })
          assert.strictEqual(first.status, 409)
          assert.deepStrictEqual(JSON.parse(first.text), { _tag: "OutOfStock", sku: "SOLD-OUT" })
          assertSameResponse(yield* client.send("POST", "/orders", { key, body }), first)
          assert.strictEqual(calls.runs("create", key), 1)
        }
      )

      test(
        "the fingerprint is the decoded payload's: the same order laid out differently replays",
        function*({ calls, client }, key) {
          const first = yield* client.send("POST", "/orders", { key, body: order })
          const relaid = yield* client.send("POST", "/orders", { key, body: "{ \"quantity\": 2,\n \"sku\": \"A-1\" }" })
          assertSameResponse(relaid, first)
          assert.strictEqual(calls.runs("create", key), 1)
        }
      )

      test(
        "a body whose decoding crashes gets 400 before anything is reserved; a valid retry runs once",
        function*({ calls, client }, key) {
          // nested 5,000 deep: formatting its issues overflows the stack where HttpApiBuilder decodes it
          const deep = "[".repeat(5000) + "]".repeat(5000)
          const crashed = yield* client.send("POST", "/orders", { key, body: `{"sku":${deep},"quantity":1}` })
          assert.strictEqual(crashed.status, 400)
          assert.notInclude(crashed.text, "[[[")
          const valid = yield* client.send("POST", "/orders", { key, body: order })
          assert.strictEqual(valid.status, 201)
          assert.strictEqual(calls.runs("create", key), 1)
        }
      )

      test(
        "400 without a key, 422 for the key with another body, and 409 is not confused with them",
        function*({ calls, client }) {
          const missing = yield* client.send("POST", "/orders", { body: order })
          assert.strictEqual(missing.status, 400)
          assert.strictEqual(missing.headers["content-type"], "application/problem+json")
          assert.strictEqual(problem(missing).status, 400)
          assert.strictEqual(calls.runs("create", ""), 0)
          const key = randomUUID()
          yield* client.send("POST", "/orders", { key, body: order })
          const reused = yield* client.send("POST", "/orders", { key, body: JSON.stringify({ sku: "B", quantity: 1 }) })
          assert.strictEqual(reused.status, 422)
          assert.strictEqual(calls.runs("create", key), 1)
        }
      )

      test(
        "the endpoints that did not opt in are untouched; an optional key runs without one",
        function*({ calls, client }, key) {
          // the static route /orders/notes next to the idempotent /orders and /orders/:id
          assert.strictEqual((yield* client.send("POST", "/orders/notes", { key, body: order })).status, 200)
          assert.strictEqual((yield* client.send("POST", "/orders/notes", { key, body: order })).status, 200)
          assert.strictEqual(calls.runs("note", key), 2)
          assert.strictEqual((yield* client.send("GET", "/orders/ord-1")).status, 200)

          assert.strictEqual((yield* client.send("PATCH", "/orders/ord-1", { body: order })).status, 200)
          assert.strictEqual((yield* client.send("PATCH", "/orders/ord-1", { body: order })).status, 200)
          assert.strictEqual(calls.runs("update", ""), 2)
          const keyed = yield* client.send("PATCH", "/orders/ord-1", { key, body: order })
          assertSameResponse(yield* client.send("PATCH", "/orders/ord-1", { key, body: order }), keyed)
          assert.strictEqual(calls.runs("update", key), 1)
        }
      )

      ordersCases(
        it,
        Effect.map(Env, ({ calls, client, proxy }) => ({
          client,
          proxy,
          runs: (key: string, tenant?: string) => calls.runs("create", key, tenant)
        })),
        ["content-type"]
      )
    }
  )
}

describe("IdempotencyHttpApi without its app middleware", () => {
  it.scoped("an idempotent endpoint reached by a router alone fails closed, without running", () =>
    Effect.gen(function*() {
      const calls = new Executions()
      const context = yield* Layer.build(
        HttpApiBuilder.api(Api).pipe(
          Layer.provide(ordersLive(calls)),
          Layer.provide(IdempotencyHttpApi.layer(Api)),
          Layer.provide(IdempotencyStore.layerMemoryWith({ warn: false })),
          Layer.provideMerge(HttpApiBuilder.Router.Live),
          Layer.provide(HttpApiBuilder.Middleware.layer)
        )
      )
      // the routes as HttpApiBuilder built them, without the app middleware around them
      const router = yield* Effect.provide(HttpApiBuilder.Router.router, context)
      const handler = HttpApp.toWebHandler(Effect.provide(router, NodeHttpServer.layerContext))
      const response = yield* Effect.promise(() =>
        handler(
          new Request("http://127.0.0.1/orders", {
            method: "POST",
            headers: { "content-type": "application/json", "idempotency-key": "k-1" },
            body: order
          })
        )
      )
      assert.strictEqual(response.status, 500)
      assert.strictEqual(calls.runs("create", "k-1"), 0)
    }))
})

describe("IdempotencyHttpApi in the OpenAPI document", () => {
  const spec = OpenApi.fromApi(Api) as unknown as {
    readonly paths: Record<
      string,
      Record<string, {
        readonly parameters: ReadonlyArray<{ readonly name: string; readonly in: string; readonly required: boolean }>
        readonly responses: Record<string, {
          readonly headers?: Record<string, unknown>
          readonly content?: Record<string, unknown>
        }>
      }>
    >
  }

  it("declares the key, the replay and Retry-After headers, and the problem responses", () => {
    const create = spec.paths["/orders"]!["post"]!
    const key = create.parameters.find((parameter) => parameter.name === "Idempotency-Key")
    assert.deepInclude(key, { in: "header", required: true })
    for (const status of ["400", "409", "413", "422", "500", "503", "504"]) {
      assert.isDefined(create.responses[status], status)
    }
    assert.isDefined(create.responses["422"]!.content!["application/problem+json"])
    assert.isDefined(create.responses["409"]!.headers!["Retry-After"])
    assert.isDefined(create.responses["201"]!.headers!["Idempotent-Replayed"])
    const update = spec.paths["/orders/{id}"]!["patch"]!
    assert.deepInclude(update.parameters.find((parameter) => parameter.name === "Idempotency-Key"), {
      required: false
    })
  })

  it("leaves the other endpoints alone", () => {
    const note = spec.paths["/orders/notes"]!["post"]!
    assert.isUndefined(note.parameters.find((parameter) => parameter.name === "Idempotency-Key"))
    assert.isUndefined(note.responses["422"])
    assert.isUndefined(note.responses["200"]!.headers)
  })
})
