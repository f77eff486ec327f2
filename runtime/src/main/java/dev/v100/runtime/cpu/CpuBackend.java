package dev.v100.runtime.cpu;

import dev.v100.formats.ggml.GgmlType;
import dev.v100.kernels.cpu.CpuGdn;
import dev.v100.kernels.cpu.W4A16Cpu;
import dev.v100.kernels.w4a16.W4A16Reference;
import dev.v100.kernels.cpu.CpuMatmul;
import dev.v100.kernels.cpu.CpuMoe;
import dev.v100.kernels.cpu.CpuOps;
import dev.v100.kernels.cpu.VectorDecode;
import dev.v100.kernels.ref.RefGdn;
import dev.v100.kernels.ref.RefMoe;
import dev.v100.kernels.ref.RefOps;
import dev.v100.kernels.ref.StoredMatrix;
import dev.v100.runtime.backend.Backend;
import dev.v100.runtime.backend.BackendException;
import dev.v100.runtime.backend.Buffer;
import dev.v100.runtime.backend.KvCache;
import dev.v100.runtime.backend.LinearAttentionState;
import dev.v100.runtime.backend.MoeRouting;
import dev.v100.runtime.backend.OpChecks;
import dev.v100.runtime.backend.Rope;
import dev.v100.runtime.backend.Weight;

import java.lang.foreign.MemorySegment;

/**
 * The CPU backend: fp32 heap activations, weights used in place from the mapped bundle.
 * {@link Kernels#FAST} runs kernels.cpu (Vector API, all cores); {@link Kernels#REFERENCE} runs the
 * scalar oracle kernels.ref, for tests that need the whole model computed by the reference. The
 * FAST gated delta rule runs a prefill of several rows in the chunked form and single rows in the
 * recurrent form; REFERENCE runs the row-by-row recurrence always.
 */
public final class CpuBackend implements Backend {
    public enum Kernels { FAST, REFERENCE }

    private final Kernels kernels;

    public CpuBackend(Kernels kernels) {
        this.kernels = kernels;
    }

    public CpuBackend() {
        this(Kernels.FAST);
    }

    public Kernels kernels() {
        return kernels;
    }

    @Override
    public String name() {
        return kernels == Kernels.FAST ? "cpu" : "cpu-reference";
    }

    @Override
    public boolean supports(GgmlType type) {
        return VectorDecode.supports(type);
    }

    @Override
    public Buffer allocate(String label, int rows, int cols) {
        long n = (long) rows * cols;
        if (n > Integer.MAX_VALUE - 16) throw new BackendException(label + ": [" + rows + ", " + cols + "] is too large for a CPU buffer");
        return new CpuBuffer(label, new float[(int) n], 0, rows, cols);
    }

    @Override
    public boolean supportsW4A16() {
        return true;
    }

    @Override
    public Weight weightW4A16(String name, long[] shape, int groupSize, long storedColumns, MemorySegment blob) {
        if (shape.length != 2 && shape.length != 3) {
            throw new BackendException(name + ": W4A16 weights are [out, in] or [experts, out, in], got " + java.util.Arrays.toString(shape));
        }
        try {
            return new CpuW4A16Weight(name, shape, groupSize, storedColumns, blob);
        } catch (IllegalArgumentException e) {
            throw new BackendException(e.getMessage(), e);
        }
    }

    @Override
    public Weight weight(String name, GgmlType type, long[] shape, MemorySegment bytes) {
        if (!supports(type)) throw new BackendException(name + ": stored type " + type + " has no CPU kernel");
        if (shape.length < 1 || shape.length > 3) throw new BackendException(name + ": " + shape.length + "-D weights are not supported");
        long rows = shape.length == 1 ? 1 : shape.length == 2 ? shape[0] : Math.multiplyExact(shape[0], shape[1]);
        long cols = shape[shape.length - 1];
        try {
            return new CpuWeight(new StoredMatrix(name, type, bytes, rows, cols), shape);
        } catch (IllegalArgumentException e) {
            throw new BackendException(e.getMessage(), e);
        }
    }

    @Override
    public KvCache allocateKvCache(int kvHeads, int headDim, int capacityTokens) {
        return new CpuKvCache(kvHeads, headDim, capacityTokens);
    }

    @Override
    public LinearAttentionState allocateLinearState(int convChannels, int convKernel, int valueHeads, int keyHeadDim, int valueHeadDim) {
        try {
            return new CpuLinearState(convChannels, convKernel, valueHeads, keyHeadDim, valueHeadDim);
        } catch (IllegalArgumentException e) {
            throw new BackendException(e.getMessage(), e);
        }
    }

    @Override
    public MoeRouting allocateRouting(int capacityTokens, int numExperts, int topK) {
        try {
            return new CpuRouting(capacityTokens, numExperts, topK);
        } catch (IllegalArgumentException e) {
            throw new BackendException(e.getMessage(), e);
        }
    }

    @Override
    public void write(Buffer dst, float[] src, int srcOff) {
        CpuBuffer d = buf(dst);
        System.arraycopy(src, srcOff, d.data, d.offset, d.count());
    }

    @Override
    public float[] read(Buffer src) {
        CpuBuffer s = buf(src);
        float[] out = new float[s.count()];
        System.arraycopy(s.data, s.offset, out, 0, out.length);
        return out;
    }

    @Override
    public void copy(Buffer src, Buffer dst) {
        CpuBuffer s = buf(src), d = buf(dst);
        sameShape(s, d);
        System.arraycopy(s.data, s.offset, d.data, d.offset, s.count());
    }

    @Override
    public void embed(Weight table, int[] tokens, Buffer out) {
        if (table instanceof CpuW4A16Weight q) {
            if (q.index != null) throw new BackendException("embed: " + q + " is an act-order matrix, not a table");
            CpuBuffer o = buf(out);
            if (o.rows != tokens.length || o.cols != q.geometry.cols()) throw new BackendException("embed: " + tokens.length + " tokens of " + q + " into " + o);
            int cols = o.cols;
            for (int i = 0; i < tokens.length; i++) {
                if (tokens[i] < 0 || tokens[i] >= q.geometry.rows()) throw new BackendException("embed: token " + tokens[i] + " outside " + q);
                W4A16Reference.dequantizeRows(q.blob, q.geometry, tokens[i], 1, o.data, o.offset + i * cols);
            }
            return;
        }
        CpuWeight t = w(table);
        CpuBuffer o = buf(out);
        if (o.rows != tokens.length || o.cols != t.matrix.cols()) {
            throw new BackendException("embed: " + tokens.length + " tokens of " + t + " into " + o);
        }
        if (kernels == Kernels.FAST) CpuOps.embed(t.matrix, tokens, o.data, o.offset);
        else RefOps.embed(t.matrix, tokens, o.data, o.offset);
    }

    @Override
    public void rmsNorm(Buffer x, Weight w, int groupElems, float eps, Buffer out) {
        CpuBuffer xb = buf(x), ob = buf(out);
        CpuWeight wt = w(w);
        sameShape(xb, ob);
        if (wt.vector == null || wt.vector.length != groupElems || xb.cols % groupElems != 0) {
            throw new BackendException("rmsNorm: " + wt + " over groups of " + groupElems + " of " + xb);
        }
        if (kernels == Kernels.FAST) CpuOps.rmsNorm(xb.data, xb.offset, xb.rows, xb.cols, groupElems, wt.vector, eps, ob.data, ob.offset);
        else RefOps.rmsNorm(xb.data, xb.offset, xb.rows, xb.cols, groupElems, wt.vector, eps, ob.data, ob.offset);
    }

    @Override
    public void matmul(Buffer x, Weight w, Buffer out) {
        CpuBuffer xb = buf(x), ob = buf(out);
        if (w instanceof CpuW4A16Weight q) {
            if (q.expertRows != 0) throw new BackendException("matmul: " + q + " is an expert stack; use expertMatmul");
            if (xb.cols != q.inputCols || ob.cols != q.geometry.rows() || ob.rows != xb.rows) {
                throw new BackendException("matmul: " + xb + " @ " + q + "^T into " + ob);
            }
            float[] xd = xb.data;
            int xo = xb.offset;
            if (q.index != null) {   // act-order: the stored columns read the input through the index
                xd = q.gather(xb.data, xb.offset, xb.rows, 0);
                xo = 0;
            }
            if (kernels == Kernels.FAST) {
                W4A16Cpu.matmul(q.blob, q.geometry, xd, xo, xb.rows, ob.data, ob.offset);
            } else {
                float[] xs = java.util.Arrays.copyOfRange(xd, xo, xo + xb.rows * (int) q.geometry.cols());
                float[] ys = new float[ob.rows * ob.cols];
                W4A16Reference.matmul(xs, xb.rows, q.blob, q.geometry, ys);
                System.arraycopy(ys, 0, ob.data, ob.offset, ys.length);
            }
            return;
        }
        CpuWeight wt = w(w);
        if (wt.vector != null || wt.expertRows != 0 || xb.cols != wt.matrix.cols() || ob.cols != wt.matrix.rows() || ob.rows != xb.rows) {
            throw new BackendException("matmul: " + xb + " @ " + wt + "^T into " + ob);
        }
        if (kernels == Kernels.FAST) CpuMatmul.matmul(wt.matrix, xb.data, xb.offset, xb.rows, ob.data, ob.offset);
        else RefOps.matmul(wt.matrix, xb.data, xb.offset, xb.rows, ob.data, ob.offset);
    }

    @Override
    public void addBias(Buffer x, Weight bias) {
        CpuBuffer xb = buf(x);
        CpuWeight b = w(bias);
        if (b.vector == null || b.vector.length != xb.cols) throw new BackendException("addBias: " + b + " to " + xb);
        if (kernels == Kernels.FAST) CpuOps.addRows(xb.data, xb.offset, xb.rows, xb.cols, b.vector);
        else RefOps.addRows(xb.data, xb.offset, xb.rows, xb.cols, b.vector);
    }

    @Override
    public void rope(Buffer x, int headDim, Rope rope, int startPos) {
        CpuBuffer xb = buf(x);
        if (xb.cols % headDim != 0 || rope.rotaryDim() > headDim) {
            throw new BackendException("rope: " + xb + " is not heads of " + headDim + " (rotaryDim " + rope.rotaryDim() + ")");
        }
        int[] pos = positions(startPos, xb.rows);
        int heads = xb.cols / headDim;
        if (kernels == Kernels.FAST) CpuOps.rope(xb.data, xb.offset, xb.rows, heads, headDim, rope.rotaryDim(), rope.invFreqShared(), pos);
        else RefOps.rope(xb.data, xb.offset, xb.rows, heads, headDim, rope.rotaryDim(), rope.invFreqShared(), pos);
    }

    @Override
    public void attention(Buffer q, Buffer k, Buffer v, KvCache cache, int startPos, float scale, Buffer out) {
        CpuBuffer qb = buf(q), kb = buf(k), vb = buf(v), ob = buf(out);
        CpuKvCache c = (CpuKvCache) cache;
        int kvCols = c.kvHeads * c.headDim;
        int n = qb.rows;
        if (kb.cols != kvCols || vb.cols != kvCols || kb.rows != n || vb.rows != n || qb.cols % c.headDim != 0
                || (qb.cols / c.headDim) % c.kvHeads != 0) {
            throw new BackendException("attention: q " + qb + ", k " + kb + ", v " + vb + " against a cache of " + c.kvHeads
                    + " heads x " + c.headDim);
        }
        sameShape(qb, ob);
        if (startPos < 0 || startPos + n > c.capacity) {
            throw new BackendException("attention: positions [" + startPos + ", " + (startPos + n) + ") exceed the KV cache of "
                    + c.capacity + " tokens");
        }
        System.arraycopy(kb.data, kb.offset, c.k, startPos * kvCols, n * kvCols);
        System.arraycopy(vb.data, vb.offset, c.v, startPos * kvCols, n * kvCols);
        int heads = qb.cols / c.headDim;
        int[] pos = positions(startPos, n);
        if (kernels == Kernels.FAST) {
            CpuOps.attention(qb.data, qb.offset, n, heads, c.kvHeads, c.headDim, c.k, c.v, pos, scale, ob.data, ob.offset);
        } else {
            RefOps.attention(qb.data, qb.offset, n, heads, c.kvHeads, c.headDim, c.k, c.v, pos, scale, ob.data, ob.offset);
        }
    }

    @Override
    public void siluMul(Buffer gate, Buffer up, Buffer out) {
        CpuBuffer g = buf(gate), u = buf(up), o = buf(out);
        sameShape(g, u);
        sameShape(g, o);
        if (kernels == Kernels.FAST) CpuOps.siluMul(g.data, g.offset, u.data, u.offset, g.count(), o.data, o.offset);
        else RefOps.siluMul(g.data, g.offset, u.data, u.offset, g.count(), o.data, o.offset);
    }

    @Override
    public void add(Buffer a, Buffer b, float bScale, Buffer out) {
        CpuBuffer ab = buf(a), bb = buf(b), o = buf(out);
        sameShape(ab, bb);
        sameShape(ab, o);
        if (kernels == Kernels.FAST) CpuOps.add(ab.data, ab.offset, bb.data, bb.offset, bScale, ab.count(), o.data, o.offset);
        else RefOps.add(ab.data, ab.offset, bb.data, bb.offset, bScale, ab.count(), o.data, o.offset);
    }

    @Override
    public void scale(Buffer x, float s) {
        CpuBuffer xb = buf(x);
        if (kernels == Kernels.FAST) CpuOps.scale(xb.data, xb.offset, xb.count(), s);
        else RefOps.scale(xb.data, xb.offset, xb.count(), s);
    }

    // ---- hybrid and MoE ops ------------------------------------------------------------------------

    @Override
    public void copyColumns(Buffer src, int firstCol, int blockCols, int strideCols, Buffer dst) {
        CpuBuffer sb = buf(src), db = buf(dst);
        int blocks = blockCols < 1 ? 0 : db.cols / blockCols;
        if (blockCols < 1 || db.cols % blockCols != 0 || sb.rows != db.rows || firstCol < 0 || (blocks > 1 && strideCols < blockCols)
                || (long) firstCol + (long) (blocks - 1) * strideCols + blockCols > sb.cols || sb.data == db.data) {
            throw new BackendException("copyColumns: blocks of " + blockCols + " every " + strideCols + " from column " + firstCol
                    + " of " + sb + " into " + db);
        }
        RefOps.copyColumns(sb.data, sb.offset, sb.cols, firstCol, blockCols, strideCols, sb.rows, db.data, db.offset, db.cols);
    }

    @Override
    public void sigmoidMul(Buffer x, Buffer gate, Buffer out) {
        CpuBuffer xb = buf(x), g = buf(gate), o = buf(out);
        sameShape(xb, g);
        sameShape(xb, o);
        if (kernels == Kernels.FAST) CpuGdn.sigmoidMul(xb.data, xb.offset, g.data, g.offset, xb.count(), o.data, o.offset);
        else RefOps.sigmoidMul(xb.data, xb.offset, g.data, g.offset, xb.count(), o.data, o.offset);
    }

    @Override
    public void l2Norm(Buffer x, int groupElems, float eps, Buffer out) {
        CpuBuffer xb = buf(x), ob = buf(out);
        sameShape(xb, ob);
        if (groupElems < 1 || xb.cols % groupElems != 0) throw new BackendException("l2Norm: groups of " + groupElems + " of " + xb);
        if (kernels == Kernels.FAST) CpuGdn.l2Norm(xb.data, xb.offset, xb.rows, xb.cols, groupElems, eps, ob.data, ob.offset);
        else RefGdn.l2Norm(xb.data, xb.offset, xb.rows, xb.cols, groupElems, eps, ob.data, ob.offset);
    }

    @Override
    public void causalConv1d(Buffer x, Weight kernel, LinearAttentionState state, int startPos, Buffer out) {
        CpuBuffer xb = buf(x), ob = buf(out);
        CpuWeight w = w(kernel);
        CpuLinearState s = state(state);
        sameShape(xb, ob);
        int k = s.convKernel;
        if (xb.cols != s.convChannels || w.vector != null || w.expertRows != 0 || w.matrix.rows() != s.convChannels || w.matrix.cols() != k) {
            throw new BackendException("causalConv1d: " + xb + " with kernel " + w + " against a state of " + s.convChannels
                    + " channels x kernel " + k);
        }
        OpChecks.continuesAt("causalConv1d", "conv state", s.convTokens, startPos);
        if (startPos == 0) {
            java.util.Arrays.fill(s.conv, 0f);
        }
        if (kernels == Kernels.FAST) CpuGdn.causalConv1d(xb.data, xb.offset, xb.rows, xb.cols, w.floats(), k, s.conv, ob.data, ob.offset);
        else RefGdn.causalConv1d(xb.data, xb.offset, xb.rows, xb.cols, w.floats(), k, s.conv, ob.data, ob.offset);
        s.convTokens = startPos + xb.rows;
    }

    @Override
    public void deltaGates(Buffer alpha, Buffer beta, Weight aLog, Weight dtBias, Buffer decayOut, Buffer betaOut) {
        CpuBuffer a = buf(alpha), b = buf(beta), d = buf(decayOut), bo = buf(betaOut);
        CpuWeight al = w(aLog), dt = w(dtBias);
        sameShape(a, b);
        sameShape(a, d);
        sameShape(a, bo);
        if (al.vector == null || dt.vector == null || al.vector.length != a.cols || dt.vector.length != a.cols) {
            throw new BackendException("deltaGates: " + a + " with A_log " + al + " and dt_bias " + dt);
        }
        // [n, Hv] elementwise: a few hundred values per token, not worth a fast path
        RefGdn.deltaGates(a.data, a.offset, b.data, b.offset, a.rows, a.cols, al.vector, dt.vector, d.data, d.offset, bo.data, bo.offset);
    }

    @Override
    public void gatedDeltaRule(Buffer q, Buffer k, Buffer v, Buffer decay, Buffer beta, float scale, LinearAttentionState state,
                               int startPos, Buffer out) {
        CpuBuffer qb = buf(q), kb = buf(k), vb = buf(v), gb = buf(decay), bb = buf(beta), ob = buf(out);
        CpuLinearState s = state(state);
        int n = qb.rows, dk = s.keyHeadDim, dv = s.valueHeadDim, hv = s.valueHeads;
        int hk = OpChecks.deltaRuleKeyHeads(qb, kb, vb, gb, bb, ob, s);
        if (ob.data == qb.data || ob.data == kb.data || ob.data == vb.data) {
            throw new BackendException("gatedDeltaRule: out " + ob + " shares storage with q, k or v");
        }
        OpChecks.continuesAt("gatedDeltaRule", "state", s.recurrentTokens, startPos);
        if (startPos == 0) {
            java.util.Arrays.fill(s.recurrent, 0f);
        }
        RefGdn.Heads hd = new RefGdn.Heads(hk, hv, dk, dv);
        if (kernels == Kernels.REFERENCE) {
            RefGdn.recurrent(hd, qb.data, qb.offset, kb.data, kb.offset, vb.data, vb.offset, gb.data, gb.offset, bb.data, bb.offset, n, scale,
                    s.recurrent, ob.data, ob.offset);
        } else if (n == 1) {
            CpuGdn.recurrent(hd, qb.data, qb.offset, kb.data, kb.offset, vb.data, vb.offset, gb.data, gb.offset, bb.data, bb.offset, n, scale,
                    s.recurrent, ob.data, ob.offset);
        } else {
            CpuGdn.chunked(hd, qb.data, qb.offset, kb.data, kb.offset, vb.data, vb.offset, gb.data, gb.offset, bb.data, bb.offset, n, scale,
                    s.recurrent, ob.data, ob.offset, RefGdn.CHUNK_ROWS);
        }
        s.recurrentTokens = startPos + n;
    }

    @Override
    public void rmsNormGated(Buffer x, Buffer z, Weight w, float eps, Buffer out) {
        CpuBuffer xb = buf(x), zb = buf(z), ob = buf(out);
        CpuWeight wt = w(w);
        sameShape(xb, zb);
        sameShape(xb, ob);
        if (wt.vector == null || xb.cols % wt.vector.length != 0) throw new BackendException("rmsNormGated: " + wt + " over " + xb);
        if (kernels == Kernels.FAST) CpuGdn.rmsNormGated(xb.data, xb.offset, zb.data, zb.offset, xb.rows, xb.cols, wt.vector, eps, ob.data, ob.offset);
        else RefGdn.rmsNormGated(xb.data, xb.offset, zb.data, zb.offset, xb.rows, xb.cols, wt.vector, eps, ob.data, ob.offset);
    }

    @Override
    public void route(Buffer routerLogits, boolean normalizeTopK, MoeRouting routing) {
        CpuBuffer lb = buf(routerLogits);
        CpuRouting r = routing(routing);
        if (lb.cols != r.numExperts || lb.rows > r.capacity) {
            throw new BackendException("route: " + lb + " into a routing of " + r.capacity + " tokens x " + r.numExperts + " experts");
        }
        // n x E values per layer: the reference is fast enough and keeps one tie rule
        RefMoe.route(lb.data, lb.offset, lb.rows, lb.cols, r.topK, normalizeTopK, r.ids, r.weights);
        r.tokens = lb.rows;
    }

    @Override
    public void expertMatmul(Buffer x, Weight experts, MoeRouting routing, Buffer out) {
        CpuBuffer xb = buf(x), ob = buf(out);
        if (experts instanceof CpuW4A16Weight q) {
            CpuRouting r = routing(routing);
            int n = r.tokens, slots = n * r.topK;
            boolean perSlot = xb.rows == slots;
            if (q.expertRows == 0 || q.geometry.rows() / q.expertRows != r.numExperts || xb.cols != q.inputCols
                    || ob.cols != q.expertRows || ob.rows != slots || (xb.rows != n && !perSlot)) {
                throw new BackendException("expertMatmul: " + xb + " @ " + q + "^T into " + ob + " for " + n + " tokens x top-" + r.topK);
            }
            if (q.index != null) {   // act-order: each slot's input gathered through its expert's index
                int k2 = Math.toIntExact(q.geometry.cols());
                float[] g = new float[slots * k2];
                for (int s = 0; s < slots; s++) q.gatherRow(xb.data, xb.offset + (perSlot ? s : s / r.topK) * xb.cols, r.ids[s], g, s * k2);
                W4A16Cpu.expertMatmul(q.blob, q.geometry, q.expertRows, g, 0, true, n, r.topK, r.ids, ob.data, ob.offset);
                return;
            }
            W4A16Cpu.expertMatmul(q.blob, q.geometry, q.expertRows, xb.data, xb.offset, perSlot, n, r.topK, r.ids, ob.data, ob.offset);
            return;
        }
        CpuWeight w = w(experts);
        CpuRouting r = routing(routing);
        int n = r.tokens, slots = n * r.topK;
        boolean perSlot = xb.rows == slots;
        if (w.expertRows == 0 || w.matrix.rows() / w.expertRows != r.numExperts || xb.cols != w.matrix.cols() || ob.cols != w.expertRows
                || ob.rows != slots || (xb.rows != n && !perSlot)) {
            throw new BackendException("expertMatmul: " + xb + " @ " + w + "^T into " + ob + " for " + n + " tokens x top-" + r.topK
                    + " of " + r.numExperts + " experts");
        }
        if (kernels == Kernels.FAST) CpuMoe.expertMatmul(w.matrix, w.expertRows, xb.data, xb.offset, perSlot, n, r.topK, r.ids, ob.data, ob.offset);
        else RefMoe.expertMatmul(w.matrix, w.expertRows, xb.data, xb.offset, perSlot, n, r.topK, r.ids, ob.data, ob.offset);
    }

    @Override
    public void combineExperts(Buffer expertOut, MoeRouting routing, Buffer out) {
        CpuBuffer eb = buf(expertOut), ob = buf(out);
        CpuRouting r = routing(routing);
        if (eb.rows != r.tokens * r.topK || ob.rows != r.tokens || ob.cols != eb.cols) {
            throw new BackendException("combineExperts: " + eb + " into " + ob + " for " + r.tokens + " tokens x top-" + r.topK);
        }
        if (kernels == Kernels.FAST) CpuMoe.combine(eb.data, eb.offset, r.tokens, r.topK, eb.cols, r.weights, ob.data, ob.offset);
        else RefMoe.combine(eb.data, eb.offset, r.tokens, r.topK, eb.cols, r.weights, ob.data, ob.offset);
    }

    @Override
    public void sigmoidGateRows(Buffer x, Weight gate, Buffer y) {
        CpuBuffer xb = buf(x), yb = buf(y);
        CpuWeight g = w(gate);
        if (g.vector == null || g.vector.length != xb.cols || xb.rows != yb.rows) {
            throw new BackendException("sigmoidGateRows: " + xb + " . " + g + " scaling " + yb);
        }
        if (kernels == Kernels.FAST) CpuMoe.sigmoidGateRows(xb.data, xb.offset, xb.rows, g.vector, yb.data, yb.offset, yb.cols);
        else RefMoe.sigmoidGateRows(xb.data, xb.offset, xb.rows, g.vector, yb.data, yb.offset, yb.cols);
    }

    @Override
    public void close() {
        // heap buffers and mapped weights: nothing to free here (the bundle owns the mapping)
    }

    private static int[] positions(int startPos, int n) {
        int[] p = new int[n];
        for (int i = 0; i < n; i++) p[i] = startPos + i;
        return p;
    }

    private static CpuBuffer buf(Buffer b) {
        if (b instanceof CpuBuffer c) return c;
        throw new BackendException(b + " is not a CPU buffer");
    }

    private static CpuWeight w(Weight w) {
        if (w instanceof CpuWeight c) return c;
        throw new BackendException(w.name() + " is not a CPU weight");
    }

    private static CpuLinearState state(LinearAttentionState s) {
        if (s instanceof CpuLinearState c) return c;
        throw new BackendException(s + " is not a CPU linear-attention state");
    }

    private static CpuRouting routing(MoeRouting r) {
        if (r instanceof CpuRouting c) return c;
        throw new BackendException(r + " is not a CPU routing");
    }

    private static void sameShape(CpuBuffer a, CpuBuffer b) {
        OpChecks.sameShape(a, b);
    }
}
