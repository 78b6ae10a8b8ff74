/**
 * A loopback TCP proxy in front of a store's server, to test what a store does when the network
 * misbehaves. It forwards bytes both ways until told to stall them (hold them, with both sockets
 * open: no RST, no FIN, as a hung server or a network that stopped delivering looks to the client),
 * to reset every connection (a server that is down), or to cut the connections it has.
 *
 * The proxy listens on one port, bound when it is made and kept until its scope closes, so that
 * no other process can take the port between two phases of a test.
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
  /**
   * `"both"` (default): nothing goes through either way. `"answers"`: only what the server sends is
   * held, so requests still reach it and are applied, but no answer comes back.
   */
  readonly hold?: "both" | "answers" | undefined
  /**
   * `"all"` (default): the open connections and those opened later. `"open"`: only the connections
   * open now; later ones flow (a half-dead connection next to healthy ones).
   */
  readonly connections?: "all" | "open" | undefined
  /**
   * When given, the stall is armed rather than started: it starts once a client sends bytes for
   * which `when` returns true. Those bytes are the first held (with `hold: "answers"`, they reach
   * the server and their answer is the first held): a request lost on its way, or applied with its
   * answer lost, such as a COMMIT (`(bytes) => Buffer.from(bytes).includes("COMMIT")`).
   */
  readonly when?: ((request: Uint8Array) => boolean) | undefined
}

/**
 * Bytes held by stalls since the proxy was made: sent by clients (`requests`), and by the server
 * (`answers`).
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
  /** The port it listens on, on 127.0.0.1. */
  readonly port: number
  /** Holds bytes (see `StallOptions`) until `resume`; both sockets of each connection stay open. */
  readonly stall: (options?: StallOptions) => Effect.Effect<void>
  /** Resets every connection, open or new (RST), until `resume`: a server that is down. */
  readonly refuse: Effect.Effect<void>
  /** Delivers the bytes held, in order, and forwards everything again. */
  readonly resume: Effect.Effect<void>
  /** Closes every open connection, both sides, and forwards new ones: a network that dropped them. */
  readonly cut: Effect.Effect<void>
  /** The bytes held by stalls since the proxy was made. */
  readonly held: Effect.Effect<Held>
  /** The connections open through the proxy. */
  readonly connections: Effect.Effect<number>
}

/** One direction of a connection: held while `stalled`, with what it holds. */
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
 * Starts a proxy to `target` on a free port of 127.0.0.1 (or `options.port`), and stops it, closing
 * every connection, when the scope closes.
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
