/**
 * A loopback TCP proxy in front of a Redis server, to inject connection faults: it can stop
 * forwarding the clients' bytes while keeping every connection open (no RST, no FIN: a server that
 * stopped answering), forward what it held once resumed, and cut every connection.
 */
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as Net from "node:net"

export interface TcpProxy {
  readonly port: number
  /** Bytes the clients sent while stalled (they reached the proxy, not the server). */
  readonly stalledBytes: () => number
  /** Holds every client's bytes at the proxy, on existing and new connections. */
  readonly stall: () => void
  /** Forwards the held bytes, then everything again. */
  readonly resume: () => void
  /** Destroys every open connection (both sides) and drops the held bytes. */
  readonly cutAll: () => void
  readonly connections: () => number
}

/** A port that nothing listens on: bound by the OS, then closed. */
export const closedPort: Effect.Effect<number> = Effect.async<number>((resume) => {
  const server = Net.createServer()
  server.listen(0, "127.0.0.1", () => {
    const address = server.address() as Net.AddressInfo
    server.close(() => resume(Effect.succeed(address.port)))
  })
})

interface Pair {
  readonly client: Net.Socket
  readonly upstream: Net.Socket
  held: Array<Buffer>
}

export const make = (
  target: { readonly host: string; readonly port: number },
  port = 0
): Effect.Effect<TcpProxy, never, Scope.Scope> =>
  Effect.gen(function*() {
    const pairs = new Set<Pair>()
    let stalled = false
    let stalledBytes = 0

    const server = Net.createServer((client) => {
      const upstream = Net.connect(target.port, target.host)
      const pair: Pair = { client, upstream, held: [] }
      pairs.add(pair)
      const close = () => {
        pairs.delete(pair)
        client.destroy()
        upstream.destroy()
      }
      client.on("data", (data) => {
        if (stalled) {
          stalledBytes += data.length
          pair.held.push(data)
        } else {
          upstream.write(data)
        }
      })
      upstream.on("data", (data) => client.write(data))
      client.on("close", close)
      upstream.on("close", close)
      client.on("error", close)
      upstream.on("error", close)
    })

    const listening = yield* Effect.acquireRelease(
      Effect.async<number>((resume) => {
        server.listen(port, "127.0.0.1", () => resume(Effect.succeed((server.address() as Net.AddressInfo).port)))
      }),
      () =>
        Effect.async<void>((resume) => {
          for (const { client, upstream } of pairs) {
            client.destroy()
            upstream.destroy()
          }
          server.close(() => resume(Effect.void))
        })
    )

    return {
      port: listening,
      stalledBytes: () => stalledBytes,
      stall: () => {
        stalled = true
        stalledBytes = 0
      },
      resume: () => {
        stalled = false
        for (const pair of pairs) {
          for (const data of pair.held) pair.upstream.write(data)
          pair.held = []
        }
      },
      cutAll: () => {
        for (const { client, upstream } of pairs) {
          client.destroy()
          upstream.destroy()
        }
        pairs.clear()
        stalled = false
      },
      connections: () => pairs.size
    }
  })
