/**
 * A loopback TCP proxy in front of a store's server, to stall, refuse or cut its connections
 * (README.md#tcpproxy). Its port is bound once, for its whole life.
 *
 * @example
 * ```ts
 * import { TcpProxy } from "@effect-idempotency/testing"
 * import { Effect } from "effect"
 *
 * const scenario = Effect.gen(function*() {
 *   const proxy = yield* TcpProxy.make({ host: "127.0.0.1", port: 5432 })
 *   // point the store's client at 127.0.0.1:proxy.port, then:
 *   yield* proxy.stall() // every connection stops answering
 *   // ... a store call must now fail with StoreUnavailable within its time limit
 *   yield* proxy.resume // the held bytes are delivered, in order, and traffic flows again
 * }).pipe(Effect.scoped)
 * ```
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as Net from "node:net"

/**
 * What a stall holds, and on which connections.
 *
 * @since 0.1.0
 * @category models
 */
export interface StallOptions {
  /** Default `"both"`. */
  readonly hold?: "both" | "answers" | undefined
  /** Default `"all"`. */
  readonly connections?: "all" | "open" | undefined
  /** Arms the stall: it starts with the first client bytes for which `when` is true. */
  readonly when?: ((request: Uint8Array) => boolean) | undefined
}

/**
 * Bytes held by stalls since the proxy was made.
 *
 * @since 0.1.0
 * @category models
 */
export interface Held {
  readonly requests: number
  readonly answers: number
}

/**
 * A running proxy.
 *
 * @since 0.1.0
 * @category models
 */
export interface TcpProxy {
  /** On 127.0.0.1. */
  readonly port: number
  readonly stall: (options?: StallOptions) => Effect.Effect<void>
  readonly refuse: Effect.Effect<void>
  readonly resume: Effect.Effect<void>
  readonly cut: Effect.Effect<void>
  readonly held: Effect.Effect<Held>
  readonly connections: Effect.Effect<number>
}

interface Direction {
  readonly to: Net.Socket
  stalled: boolean
  readonly queue: Array<Buffer>
}

interface Connection {
  readonly client: Net.Socket
  readonly upstream: Net.Socket
  readonly requests: Direction
  readonly answers: Direction
}

const flush = (direction: Direction) => {
  direction.stalled = false
  for (const chunk of direction.queue.splice(0)) direction.to.write(chunk)
}

/**
 * Starts a proxy to `target` on a free port of 127.0.0.1, closed with the scope.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  target: { readonly host: string; readonly port: number },
  options?: { readonly port?: number | undefined }
): Effect.Effect<TcpProxy, never, Scope.Scope> =>
  Effect.gen(function*() {
    const open = new Set<Connection>()
    // what a new connection starts with
    let mode: "forward" | "refuse" | "stall" = "forward"
    let newHold: "both" | "answers" = "both"
    const held = { requests: 0, answers: 0 }
    // a stall waiting for the request that starts it
    let armed: StallOptions | undefined

    const startStall = (stallOptions: StallOptions | undefined) => {
      const hold = stallOptions?.hold ?? "both"
      for (const connection of open) {
        connection.answers.stalled = true
        if (hold === "both") connection.requests.stalled = true
      }
      if ((stallOptions?.connections ?? "all") === "all") {
        mode = "stall"
        newHold = hold
      }
    }

    const destroy = (connection: Connection) => {
      open.delete(connection)
      connection.client.destroy()
      connection.upstream.destroy()
    }

    const server = Net.createServer((client) => {
      if (mode === "refuse") {
        client.resetAndDestroy()
        return
      }
      const upstream = Net.connect(target.port, target.host)
      const stalled = mode === "stall"
      const connection: Connection = {
        client,
        upstream,
        requests: { to: upstream, stalled: stalled && newHold === "both", queue: [] },
        answers: { to: client, stalled, queue: [] }
      }
      open.add(connection)
      const close = () => destroy(connection)
      client.on("data", (data) => {
        if (armed?.when?.(data) === true) {
          const stallOptions = armed
          armed = undefined
          startStall(stallOptions)
        }
        if (connection.requests.stalled) {
          held.requests += data.length
          connection.requests.queue.push(data)
        } else {
          upstream.write(data)
        }
      })
      upstream.on("data", (data) => {
        if (connection.answers.stalled) {
          held.answers += data.length
          connection.answers.queue.push(data)
        } else {
          client.write(data)
        }
      })
      client.on("close", close)
      upstream.on("close", close)
      client.on("error", close)
      upstream.on("error", close)
    })

    const port = yield* Effect.acquireRelease(
      Effect.async<number>((resume) => {
        server.listen(options?.port ?? 0, "127.0.0.1", () => {
          resume(Effect.succeed((server.address() as Net.AddressInfo).port))
        })
      }),
      () =>
        Effect.async<void>((resume) => {
          for (const connection of open) destroy(connection)
          server.close(() => resume(Effect.void))
        })
    )

    const resume = Effect.sync(() => {
      mode = "forward"
      armed = undefined
      for (const connection of open) {
        flush(connection.requests)
        flush(connection.answers)
      }
    })

    return {
      port,
      stall: (stallOptions) =>
        Effect.sync(() => {
          if (stallOptions?.when === undefined) startStall(stallOptions)
          else armed = stallOptions
        }),
      refuse: Effect.sync(() => {
        mode = "refuse"
        for (const connection of open) {
          connection.client.resetAndDestroy()
          destroy(connection)
        }
      }),
      resume,
      cut: Effect.sync(() => {
        mode = "forward"
        armed = undefined
        for (const connection of open) destroy(connection)
      }),
      held: Effect.sync(() => ({ ...held })),
      connections: Effect.sync(() => open.size)
    }
  })
