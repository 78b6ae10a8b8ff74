/**
 * The test Worker: `Cloudflare.test.ts` bundles it with esbuild and runs it in workerd through
 * Miniflare. `/d1/…` runs on the D1 binding `DB` with `D1SqlClient`; `/do/…` is forwarded to one
 * Durable Object, which runs the same on its SQLite storage with `DurableObjectSqlClient` (see
 * `checks.ts` for the routes). Typed without `@cloudflare/workers-types`: only what is used.
 */
import { D1SqlClient, DurableObjectSqlClient } from "@effect-idempotency/sql"
import type * as SqlClient from "@effect/sql/SqlClient"
import type * as Layer from "effect/Layer"
import { handle } from "./checks.js"

interface DurableObjectNamespace {
  idFromName(name: string): unknown
  get(id: unknown): { fetch(request: Request): Promise<Response> }
}

interface Env {
  readonly DB: D1SqlClient.D1Database
  readonly STORE: DurableObjectNamespace
}

/** The Durable Object of `/do/…`: one object, whose storage every request shares. */
export class StoreObject {
  readonly client: Layer.Layer<SqlClient.SqlClient>

  constructor(ctx: { readonly storage: { readonly sql: DurableObjectSqlClient.SqlStorage } }) {
    this.client = DurableObjectSqlClient.layer(ctx.storage.sql)
  }

  fetch(request: Request): Promise<Response> {
    return handle(request, this.client)
  }
}

export default {
  fetch(request: Request, env: Env): Promise<Response> {
    const binding = new URL(request.url).pathname.split("/")[1]
    if (binding === "d1") return handle(request, D1SqlClient.layer(env.DB))
    if (binding === "do") return env.STORE.get(env.STORE.idFromName("store")).fetch(request)
    return Promise.resolve(Response.json({ ok: false, name: "unknown", details: "no binding" }, { status: 404 }))
  }
}
