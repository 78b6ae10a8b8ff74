/**
 * PGlite (PostgreSQL in WASM: one session) served to any number of `pg` connections on a loopback
 * port. PGlite has one unnamed statement and one unnamed portal, as a server has per connection: a
 * connection owns the session from its first message until it ends a sequence (Sync or a simple
 * Query) outside a transaction block, and every other connection waits for it. Serving messages one
 * by one from every connection (as a per-message queue does) lets a second connection's Parse replace
 * the first's statement between its Parse and its Execute: a query then answers with another
 * connection's rows, or with "portal does not exist". A connection that closes while it owns the
 * session has its sequence ended (Sync) and its transaction rolled back.
 *
 * @example
 * const db = yield* Effect.acquireRelease(Effect.promise(() => PGlite.create()), (db) => Effect.promise(() => db.close()))
 * const { url } = yield* PgliteServer.serve(db)
 * // url: postgres://postgres@127.0.0.1:40123/postgres
 */
import type { PGlite } from "@electric-sql/pglite"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as net from "node:net"

/** Where the server listens. */
export interface Served {
  readonly url: string
  /** `host:port` */
  readonly address: string
}

const SSL_REQUEST = 80877103
const GSSENC_REQUEST = 80877104
const CANCEL_REQUEST = 80877102
const QUERY = 0x51 // "Q"
const SYNC = 0x53 // "S"
const TERMINATE = 0x58 // "X"
const SYNC_MESSAGE = new Uint8Array([SYNC, 0, 0, 0, 4])

interface Waiter {
  readonly connection: number
  readonly resume: () => void
}

/** Who holds PGlite's one session, and who waits for it (first come, first served). */
class Session {
  private owner: number | undefined
  private readonly waiting: Array<Waiter> = []
  constructor(readonly db: PGlite) {}

  acquire(connection: number): Promise<void> {
    if (this.owner === undefined || this.owner === connection) {
      this.owner = connection
      return Promise.resolve()
    }
    return new Promise((resume) => this.waiting.push({ connection, resume }))
  }

  /** Runs one protocol message of `connection`, which holds the session; `ends` when it may end a sequence. */
  async run(connection: number, message: Uint8Array, ends: boolean, onData: (data: Uint8Array) => void) {
    await this.db.runExclusive(() => this.db.execProtocolRawStream(message, { onRawData: onData }))
    if (ends && !this.db.isInTransaction()) this.release(connection)
  }

  /** `connection` is gone: its sequence ended and its transaction rolled back if it held the session. */
  async close(connection: number) {
    if (this.owner !== connection) return
    await this.db.runExclusive(() => this.db.execProtocolRawStream(SYNC_MESSAGE, { onRawData: () => {} }))
    if (this.db.isInTransaction()) await this.db.exec("ROLLBACK")
    this.release(connection)
  }

  private release(connection: number) {
    if (this.owner !== connection) return
    const next = this.waiting.shift()
    this.owner = next?.connection
    next?.resume()
  }
}

/** One client's socket: its bytes cut into protocol messages, run in order through the session. */
const attach = (session: Session, id: number, socket: net.Socket): Promise<void> => {
  let buffer: Buffer = Buffer.alloc(0)
  let started = false
  let closed = false
  let chain = Promise.resolve()
  const write = (data: Uint8Array) => {
    if (!closed && socket.writable) socket.write(Buffer.from(data))
  }
  const enqueue = (message: Uint8Array, ends: boolean) => {
    chain = chain.then(async () => {
      if (closed) return
      await session.acquire(id)
      if (!closed) await session.run(id, message, ends, write)
    }).catch(() => {
      socket.destroy()
    })
  }
  const cut = () => {
    while (!closed) {
      if (!started) {
        if (buffer.length < 8) return
        const length = buffer.readInt32BE(0)
        if (buffer.length < length) return
        const code = buffer.readInt32BE(4)
        const message = buffer.subarray(0, length)
        buffer = buffer.subarray(length)
        if (code === SSL_REQUEST || code === GSSENC_REQUEST) {
          socket.write("N")
        } else if (code === CANCEL_REQUEST) {
          socket.end()
          return
        } else {
          started = true
          enqueue(new Uint8Array(message), true)
        }
      } else {
        if (buffer.length < 5) return
        const length = 1 + buffer.readInt32BE(1)
        if (buffer.length < length) return
        const type = buffer[0]
        const message = buffer.subarray(0, length)
        buffer = buffer.subarray(length)
        if (type === TERMINATE) {
          socket.end()
          return
        }
        enqueue(new Uint8Array(message), type === SYNC || type === QUERY)
      }
    }
  }
  socket.setNoDelay(true)
  socket.on("data", (chunk: Buffer) => {
    buffer = buffer.length === 0 ? chunk : Buffer.concat([buffer, chunk])
    cut()
  })
  socket.on("error", () => socket.destroy())
  return new Promise((resolve) => {
    socket.on("close", () => {
      closed = true
      chain = chain.then(() => session.close(id)).catch(() => {})
      resolve(chain)
    })
  })
}

/**
 * Serves `db` on a free loopback port (or `port`) until the scope closes; a connection past
 * `maxConnections` (100 unless given) is refused.
 */
export const serve = (db: PGlite, options?: {
  readonly host?: string | undefined
  readonly port?: number | undefined
  readonly maxConnections?: number | undefined
}): Effect.Effect<Served, never, Scope.Scope> => {
  const host = options?.host ?? "127.0.0.1"
  const maxConnections = options?.maxConnections ?? 100
  return Effect.map(
    Effect.acquireRelease(
      Effect.async<{
        readonly server: net.Server
        readonly sockets: Set<net.Socket>
        readonly closed: Set<Promise<void>>
      }>((resume) => {
        const session = new Session(db)
        const sockets = new Set<net.Socket>()
        const closed = new Set<Promise<void>>()
        let next = 0
        const server = net.createServer((socket) => {
          if (sockets.size >= maxConnections) {
            socket.destroy()
            return
          }
          sockets.add(socket)
          const done = attach(session, next++, socket)
          closed.add(done)
          void done.then(() => {
            sockets.delete(socket)
            closed.delete(done)
          })
        })
        server.listen(options?.port ?? 0, host, () => resume(Effect.succeed({ server, sockets, closed })))
      }),
      ({ closed, server, sockets }) =>
        Effect.promise(async () => {
          const stopped = new Promise<void>((resolve) => server.close(() => resolve()))
          for (const socket of sockets) socket.destroy()
          await stopped
          await Promise.all(closed)
        })
    ),
    ({ server }) => {
      const { port } = server.address() as net.AddressInfo
      const address = `${host}:${port}`
      return { url: `postgres://postgres@${address}/postgres`, address }
    }
  )
}
