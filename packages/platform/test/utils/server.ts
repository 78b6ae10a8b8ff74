/**
 * A real server for the tests: `NodeHttpServer` on a free loopback port, serving an app with a
 * store (behind a proxy the tests can take down), and a real `HttpClient` (fetch) to call it.
 */
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import type * as HttpApp from "@effect/platform/HttpApp"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as HttpServer from "@effect/platform/HttpServer"
import type * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as Http from "node:http"

export interface Reply {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  readonly bytes: Uint8Array
  readonly text: string
}

export interface Client {
  readonly url: string
  readonly send: (
    method: "GET" | "POST" | "PATCH" | "PUT",
    path: string,
    init?: {
      readonly key?: string | undefined
      readonly body?: string | Uint8Array | undefined
      readonly headers?: Record<string, string> | undefined
      /** Send the body as a stream, without a content length (chunked). */
      readonly chunked?: boolean | undefined
    }
  ) => Effect.Effect<Reply>
}

const decoder = new TextDecoder()

/** Serves `app` on 127.0.0.1 for the life of the scope. */
export const serve = <E, R>(
  app: HttpApp.Default<E, R>
): Effect.Effect<
  Client,
  unknown,
  Scope.Scope | Exclude<R, HttpServer.HttpServer | Scope.Scope | HttpServerRequest.HttpServerRequest>
> =>
  Effect.gen(function*() {
    const server = yield* Layer.build(NodeHttpServer.layer(() => Http.createServer(), { port: 0, host: "127.0.0.1" }))
    yield* HttpServer.serveEffect(app).pipe(Effect.provide(server))
    const address = Context.get(server, HttpServer.HttpServer).address
    if (address._tag !== "TcpAddress") return yield* Effect.dieMessage("not a TCP address")
    const url = `http://127.0.0.1:${address.port}`
    const client = Context.get(yield* Layer.build(FetchHttpClient.layer), HttpClient.HttpClient)
    const send: Client["send"] = (method, path, init) => {
      let request = HttpClientRequest.make(method)(`${url}${path}`).pipe(
        HttpClientRequest.setHeaders({
          ...(init?.key === undefined ? {} : { "idempotency-key": init.key }),
          ...init?.headers
        })
      )
      if (init?.body !== undefined && init.chunked === true) {
        const bytes = typeof init.body === "string" ? new TextEncoder().encode(init.body) : init.body
        const chunks = Array.from({ length: Math.ceil(bytes.byteLength / 1024) }, (_, i) =>
          bytes.slice(i * 1024, (i + 1) * 1024))
        request = HttpClientRequest.bodyStream(request, Stream.fromIterable(chunks), {
          contentType: init.headers?.["content-type"] ?? "application/json"
        })
      } else if (init?.body !== undefined) {
        request = typeof init.body === "string"
          ? HttpClientRequest.bodyText(request, init.body, init.headers?.["content-type"] ?? "application/json")
          : HttpClientRequest.bodyUint8Array(request, init.body, "application/octet-stream")
      }
      return client.execute(request).pipe(
        Effect.flatMap((response) =>
          Effect.map(response.arrayBuffer, (buffer) => {
            const bytes = new Uint8Array(buffer)
            return { status: response.status, headers: response.headers, bytes, text: decoder.decode(bytes) }
          })
        ),
        Effect.orDie
      )
    }
    return { url, send }
  }) as Effect.Effect<
    Client,
    unknown,
    Scope.Scope | Exclude<R, HttpServer.HttpServer | Scope.Scope | HttpServerRequest.HttpServerRequest>
  >
