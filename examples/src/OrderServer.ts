/**
 * The same `create-order` work, served by an HTTP server instead of a Netlify function: an
 * `HttpRouter` route on `NodeHttpServer` (127.0.0.1), made idempotent with `IdempotencyMiddleware`
 * and the function's time limit as the request's cut-off. The platform of the scenario calls it
 * over the network; when it cuts an attempt off, it closes the connection, and the server's attempt
 * goes on and records its outcome, as a server does.
 */
import type { IdempotencyPolicy, IdempotencyStore } from "@effect-idempotency/core"
import type { NetlifyFunction } from "@effect-idempotency/netlify"
import { IdempotencyMiddleware } from "@effect-idempotency/platform"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import type * as HttpApp from "@effect/platform/HttpApp"
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServer from "@effect/platform/HttpServer"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import * as Http from "node:http"
import { Order } from "./Downstream.js"
import * as OrderFunction from "./OrderFunction.js"

export interface Options {
  readonly downstreamUrl: string
  readonly timeLimit: Duration.DurationInput
  /** The server's log lines go here (the journal of the run). */
  readonly logger: Layer.Layer<never>
}

export interface ProtectedOptions extends Options {
  readonly store: Layer.Layer<IdempotencyStore.IdempotencyStore>
  readonly margin: Duration.DurationInput
  readonly onTimeout: IdempotencyPolicy.TimeoutPolicy
}

/** The route's work: the order of the body, written downstream, answered as the function answers it. */
const createOrder = (downstreamUrl: string) =>
  HttpServerRequest.schemaBodyJson(Order).pipe(
    Effect.flatMap((order) => OrderFunction.createOrder(downstreamUrl, order)),
    Effect.map((response) =>
      HttpServerResponse.text(response.body, {
        status: response.status,
        headers: response.headers,
        contentType: response.headers["content-type"]
      })
    ),
    Effect.catchAll(() => Effect.succeed(HttpServerResponse.text("the order could not be written", { status: 502 })))
  )

/** Serves the route on a free loopback port; the handler the platform calls forwards to it. */
const serve = <R>(
  route: HttpApp.Default<never, R>,
  services: Layer.Layer<Exclude<R, HttpServerRequest.HttpServerRequest>>
): Effect.Effect<NetlifyFunction.Handler, unknown, Scope.Scope> =>
  Effect.gen(function*() {
    const server = yield* Layer.build(NodeHttpServer.layer(() => Http.createServer(), { port: 0, host: "127.0.0.1" }))
    const app = HttpRouter.empty.pipe(HttpRouter.post("/orders", route))
    yield* HttpServer.serveEffect(app).pipe(Effect.provide(services), Effect.provide(server))
    const address = Context.get(server, HttpServer.HttpServer).address
    if (address._tag !== "TcpAddress") return yield* Effect.dieMessage("the server has no TCP address")
    const forward = (request: Request): Promise<Response> =>
      fetch(`http://127.0.0.1:${address.port}/orders`, {
        method: request.method,
        headers: request.headers,
        body: request.body,
        signal: request.signal,
        duplex: "half"
      } as RequestInit)
    return Object.assign(forward, { ready: () => Promise.resolve(), dispose: () => Promise.resolve() })
  })

/** Without idempotency: every request writes. */
export const unprotected = (options: Options) =>
  serve(createOrder(options.downstreamUrl), Layer.merge(OrderFunction.HttpClientLive, options.logger))

/**
 * With idempotency: the key is the client's `Idempotency-Key` header; the route gets the time left
 * less `margin` before the cut-off, so the outcome or the timeout policy is recorded first; the lease
 * is the time limit.
 */
export const idempotent = (options: ProtectedOptions) =>
  serve(
    createOrder(options.downstreamUrl).pipe(
      IdempotencyMiddleware.make({
        name: "create-order",
        timeLimit: options.timeLimit,
        margin: options.margin,
        onTimeout: options.onTimeout,
        logLevel: "Info"
      })
    ),
    Layer.mergeAll(options.store, OrderFunction.HttpClientLive, options.logger)
  )
