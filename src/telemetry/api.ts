/**
 * OpenTelemetry's API, an optional peer, loaded on first use, and the providers the app chose: its own, or the
 * global ones (the default). Without the API nothing is recorded.
 */
import { createRequire } from 'node:module'
import type * as Otel from '@opentelemetry/api'

export type Api = typeof Otel

/** OpenTelemetry's TracerProvider, as drizzle-jobs uses it. */
export interface TracerProviderLike {
  getTracer(name: string, version?: string): unknown
}

/** OpenTelemetry's MeterProvider, as drizzle-jobs uses it. */
export interface MeterProviderLike {
  getMeter(name: string, version?: string): unknown
}

/** The system's name in every span and metric (`messaging.system`). */
export const MESSAGING_SYSTEM = 'drizzle-jobs'

let api: Api | null | undefined

/** The OpenTelemetry API, or null where the app does not have it. */
export function otel(): Api | null {
  if (api === undefined) {
    try {
      api = createRequire(import.meta.url)('@opentelemetry/api') as Api
    } catch {
      api = null
    }
  }
  return api
}

/** The providers in use: null for the global ones. */
export const providers: { tracerProvider: TracerProviderLike | null; meterProvider: MeterProviderLike | null } = {
  tracerProvider: null,
  meterProvider: null,
}

/** What {@link configureTelemetry} takes. */
export interface TelemetryOptions {
  /** The TracerProvider that adds, runs and schedules record their spans with; null or absent: the global one. */
  tracerProvider?: TracerProviderLike | null
  /** The MeterProvider that the metrics are recorded with; null or absent: the global one. */
  meterProvider?: MeterProviderLike | null
}

/**
 * Sets where drizzle-jobs records its spans and metrics, in place of OpenTelemetry's global providers (the default).
 * The app's SDK decides where they go: drizzle-jobs exports nothing itself.
 *
 * @example
 * configureTelemetry({ tracerProvider, meterProvider })
 */
export function configureTelemetry(options: TelemetryOptions): void {
  providers.tracerProvider = options.tracerProvider ?? null
  providers.meterProvider = options.meterProvider ?? null
}
