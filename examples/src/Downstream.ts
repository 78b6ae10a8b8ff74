/**
 * The downstream service the function writes through: an order API on 127.0.0.1 that keeps every
 * write in its own `orders` table. Its first request is answered only after a delay longer than the
 * function's time limit (the write itself happens at once), so the function never sees that answer.
 *
 * With `dedupByKey`, it also keeps an `idempotency_keys` table: a request whose `Idempotency-Key`
 * it has seen gets the stored answer back (with `Idempotent-Replayed: true`) and writes nothing.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as FiberSet from "effect/FiberSet"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import type * as Journal from "./Journal.js"

export const Order = Schema.Struct({ sku: Schema.String, quantity: Schema.Int.pipe(Schema.positive()) })
export type Order = typeof Order.Type

export const Created = Schema.Struct({ orderId: Schema.String, sku: Schema.String, quantity: Schema.Number })
export type Created = typeof Created.Type

export interface OrderRow extends Created {
  /** The request that wrote it (1 for the first). */
  readonly request: number
  /** The `Idempotency-Key` the request carried, if any. */
  readonly idempotencyKey: string | undefined
  /** When it was written, in milliseconds since the start of the run. */
  readonly writtenAt: number
}

export interface DownstreamRequest {
  readonly request: number
  readonly idempotencyKey: string | undefined
}

export interface Options {
  readonly dedupByKey: boolean
  /** How long the first request waits for its answer. */
  readonly firstResponseDelay: Duration.DurationInput
  readonly journal: Journal.Journal
}

export interface Downstream {
  readonly url: string
  /** The `orders` table. */
  readonly orders: Effect.Effect<ReadonlyArray<OrderRow>>
  /** Every request that reached the service, with the `Idempotency-Key` it carried. */
  readonly requests: Effect.Effect<ReadonlyArray<DownstreamRequest>>
}

const shortKey = (key: string | undefined) =>
  key === undefined ? "no Idempotency-Key" : `Idempotency-Key ${key.slice(0, 10)}…`

export const make = (options: Options): Effect.Effect<Downstream, never, Scope.Scope> =>
  Effect.gen(function*() {
    const journal = options.journal
    const orders: Array<OrderRow> = []
    const idempotencyKeys = new Map<string, Created>()
    const requests: Array<DownstreamRequest> = []
    const run = yield* FiberSet.makeRuntime<never, void, never>()
    const decode = Schema.decodeUnknownEither(Schema.parseJson(Order))

    const handle = (
      body: string,
      key: string | undefined,
      reply: (status: number, json: unknown, replayed: boolean) => void
    ) =>
      Effect.gen(function*() {
        const n = requests.push({ request: requests.length + 1, idempotencyKey: key })
        const order = decode(body)
        if (order._tag === "Left") {
          reply(400, { error: "invalid order" }, false)
          return
        }
        const seen = options.dedupByKey && key !== undefined ? idempotencyKeys.get(key) : undefined
        if (seen !== undefined) {
          yield* journal.add(
            "downstream",
            `request #${n} (${shortKey(key)}): key seen before, answered ${seen.orderId} again; nothing written`
          )
          reply(201, seen, true)
          return
        }
        const writtenAt = yield* journal.elapsed
        const created: Created = { orderId: `ord_${orders.length + 1}`, ...order.right }
        orders.push({ ...created, request: n, idempotencyKey: key, writtenAt })
        if (options.dedupByKey && key !== undefined) idempotencyKeys.set(key, created)
        if (n === 1) {
          const delay = Duration.toMillis(options.firstResponseDelay)
          yield* journal.add(
            "downstream",
            `request #${n} (${shortKey(key)}): wrote ${created.orderId}; slow, answering in ${delay} ms`
          )
          yield* Effect.sleep(options.firstResponseDelay)
        } else {
          yield* journal.add("downstream", `request #${n} (${shortKey(key)}): wrote ${created.orderId}; answering now`)
        }
        reply(201, created, false)
      })

    const server = createServer((req, res) => {
      const chunks: Array<Buffer> = []
      req.on("data", (chunk: Buffer) => chunks.push(chunk))
      req.on("end", () => {
        const header = req.headers["idempotency-key"]
        const key = Array.isArray(header) ? header[0] : header
        run(handle(Buffer.concat(chunks).toString("utf8"), key, (status, json, replayed) => {
          // the caller may have gone (cut off at its time limit): the answer is then lost
          if (res.destroyed || res.writableEnded) return
          res.writeHead(status, {
            "content-type": "application/json",
            ...(replayed ? { "idempotent-replayed": "true" } : {})
          })
          res.end(JSON.stringify(json))
        }))
      })
    })

    const port = yield* Effect.acquireRelease(
      Effect.async<number>((resume) => {
        server.listen(0, "127.0.0.1", () => resume(Effect.succeed((server.address() as AddressInfo).port)))
      }),
      () =>
        Effect.async<void>((resume) => {
          server.closeAllConnections()
          server.close(() => resume(Effect.void))
        })
    )

    return {
      url: `http://127.0.0.1:${port}`,
      orders: Effect.sync(() => [...orders]),
      requests: Effect.sync(() => [...requests])
    }
  })
