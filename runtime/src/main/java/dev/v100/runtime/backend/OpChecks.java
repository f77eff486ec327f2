package dev.v100.runtime.backend;

/**
 * The argument checks every backend makes the same way, with the same messages: shapes of buffers
 * and the linear-attention ops' shapes and positions.
 */
public final class OpChecks {
    private OpChecks() {}

    public static void sameShape(Buffer a, Buffer b) {
        if (a.rows() != b.rows() || a.cols() != b.cols()) throw new BackendException("shape mismatch: " + a + " vs " + b);
    }

    /**
     * gatedDeltaRule's operands against its state: q, k [n, Hk*dk], v and out [n, Hv*dv], decay and beta
     * [n, Hv], Hv a multiple of Hk. Returns Hk.
     */
    public static int deltaRuleKeyHeads(Buffer q, Buffer k, Buffer v, Buffer decay, Buffer beta, Buffer out, LinearAttentionState s) {
        int n = q.rows(), dk = s.keyHeadDim(), dv = s.valueHeadDim(), hv = s.valueHeads();
        sameShape(q, k);
        sameShape(v, out);
        sameShape(decay, beta);
        int hk = q.cols() / dk;
        if (q.cols() % dk != 0 || hk < 1 || hv % hk != 0 || v.cols() != hv * dv || decay.cols() != hv || v.rows() != n || decay.rows() != n) {
            throw new BackendException("gatedDeltaRule: q " + q + ", k " + k + ", v " + v + ", decay " + decay + " against a state of "
                    + hv + " value heads x " + dk + " x " + dv);
        }
        return hk;
    }

    /** A rows op's buffers, states and positions agree: one of each a row. */
    public static void rows(String op, int rows, int states, int positions) {
        if (states != rows || positions != rows) {
            throw new BackendException(op + ": " + rows + " rows, " + states + " states and " + positions + " positions (one of each a row)");
        }
    }

    /**
     * A linear-attention state part that holds {@code held} tokens continues at startPos: at 0 (the caller
     * resets it) or exactly where it stopped; it cannot be rewound.
     */
    public static void continuesAt(String op, String part, int held, int startPos) {
        if (startPos != 0 && startPos != held) {
            throw new BackendException(op + ": the " + part + " holds " + held + " tokens, the call continues at position " + startPos
                    + " (a linear-attention state cannot be rewound; start again at 0)");
        }
    }
}
