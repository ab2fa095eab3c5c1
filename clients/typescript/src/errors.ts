/**
 * Typed errors, one class per kind of server answer, built from koinon's error shape
 * `{"error": {"code", "message", "fields"}}` (docs/api.md).
 */

export interface ErrorDetails {
  code: string;
  status?: number;
  fields?: Record<string, string>;
}

/** Any error koinon answered with: `code` is part of the API contract; `fields` names bad inputs. */
export class KoinonError extends Error {
  readonly code: string;
  readonly status: number | undefined;
  readonly fields: Record<string, string>;

  constructor(message: string, details: ErrorDetails) {
    super(`${details.code}: ${message}`);
    this.name = new.target.name;
    this.code = details.code;
    this.status = details.status;
    this.fields = details.fields ?? {};
  }
}

export class BadRequestError extends KoinonError {}
/** 401: no key, a malformed header, or an unknown or revoked key (indistinguishable). */
export class AuthenticationError extends KoinonError {}
export class PermissionDeniedError extends KoinonError {}
/** 404: missing, or not visible to you; koinon answers both alike. */
export class NotFoundError extends KoinonError {}
export class ConflictError extends KoinonError {}
export class PayloadTooLargeError extends KoinonError {}
/** 422: well-formed input that fails validation; `fields` names each bad field. */
export class ValidationError extends KoinonError {}
export class ServiceUnavailableError extends KoinonError {}
/** Any other 5xx. */
export class ServerError extends KoinonError {}
/** An event stream ended without its final event. */
export class StreamError extends KoinonError {}
/** The run ended `failed` (`code`: `provider_error`, `internal_error`, `queue_unavailable`). */
export class RunFailedError extends StreamError {}

const BY_STATUS: Record<number, typeof KoinonError> = {
  400: BadRequestError,
  401: AuthenticationError,
  403: PermissionDeniedError,
  404: NotFoundError,
  409: ConflictError,
  413: PayloadTooLargeError,
  422: ValidationError,
  503: ServiceUnavailableError,
};

/** The typed error of an error response (reads its body). */
export async function errorFromResponse(response: Response): Promise<KoinonError> {
  let code = `http_${response.status}`;
  let message = response.statusText;
  let fields: Record<string, string> = {};
  try {
    const error = ((await response.json()) as { error?: unknown }).error as Record<string, unknown>;
    if (typeof error.code === "string") {
      code = error.code;
      if (typeof error.message === "string") message = error.message;
      if (typeof error.fields === "object" && error.fields !== null) {
        fields = Object.fromEntries(Object.entries(error.fields).map(([k, v]) => [k, String(v)]));
      }
    }
  } catch {
    // not koinon's error shape (a proxy's page): typed by status alone
  }
  const kind = BY_STATUS[response.status] ?? (response.status >= 500 ? ServerError : KoinonError);
  return new kind(message, { code, status: response.status, fields });
}
