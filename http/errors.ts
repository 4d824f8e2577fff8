/**
 * Error factories with the stable codes of SPEC.md "Errors", and the one envelope they render to:
 * `{error: {code, message, status}}`.
 */
export type ErrorCode =
  | 'VALIDATION_ERROR'
  | 'INVALID_INPUT'
  | 'UNAUTHORIZED'
  | 'FORBIDDEN'
  | 'NOT_FOUND'
  | 'CONFLICT'
  | 'PAYLOAD_TOO_LARGE'
  | 'RATE_LIMITED'
  | 'INTERNAL_ERROR'
  | 'SERVICE_UNAVAILABLE'
  | (string & {});

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: ErrorCode,
    message: string,
    readonly details?: unknown,
  ) {
    super(message);
    this.name = 'ApiError';
  }

  toBody(): { error: { code: string; message: string; status: number; details?: unknown } } {
    return {
      error: {
        code: this.code,
        message: this.message,
        status: this.status,
        ...(this.details === undefined ? {} : { details: this.details }),
      },
    };
  }
}

export const errors = {
  validation: (message: string, details?: unknown) => new ApiError(400, 'VALIDATION_ERROR', message, details),
  invalidInput: (message: string) => new ApiError(400, 'INVALID_INPUT', message),
  unauthorized: (message = 'Missing or invalid credential') => new ApiError(401, 'UNAUTHORIZED', message),
  forbidden: (message: string) => new ApiError(403, 'FORBIDDEN', message),
  notFound: (message: string) => new ApiError(404, 'NOT_FOUND', message),
  conflict: (message: string) => new ApiError(409, 'CONFLICT', message),
  tooLarge: (message: string) => new ApiError(413, 'PAYLOAD_TOO_LARGE', message),
  rateLimited: (message = 'Rate limit exceeded') => new ApiError(429, 'RATE_LIMITED', message),
  internal: () => new ApiError(500, 'INTERNAL_ERROR', 'Internal error; retry later'),
  unavailable: (message: string) => new ApiError(503, 'SERVICE_UNAVAILABLE', message),
};
