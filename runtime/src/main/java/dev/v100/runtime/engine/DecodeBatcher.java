package dev.v100.runtime.engine;

import dev.v100.runtime.backend.RowMax;
import dev.v100.runtime.backend.RowTop;
import dev.v100.runtime.model.DecoderModel;
import dev.v100.runtime.sample.Logits;
import dev.v100.runtime.sample.Sampler;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.ReentrantLock;

/**
 * Lets up to {@code maxBatch} generations share one {@link DecoderModel}: each holds a sequence slot (its own
 * KV caches), every model call is serialized, and the decode steps of the sequences that are decoding are
 * joined into one {@link DecoderModel#decode} pass, which reads the weights once for all of them.
 *
 * <p>A thread with a step to run queues it; whoever takes the model first leads: it waits (at most
 * {@link #JOIN_NANOS}) until every decoding sequence has queued its step, runs them all as one batch and
 * hands each thread its logits row, or its next token for a greedy step (when every step of the batch is greedy, the
 * picks are made where the logits are: {@link DecoderModel#decodeGreedy}). A sequence alone runs as a plain
 * one-token forward.
 */
public final class DecodeBatcher {
    /** How long a leader waits for the other decoding sequences to queue their steps (they are sampling). */
    static final long JOIN_NANOS = 2_000_000;

    private final DecoderModel model;
    private final int maxBatch;
    private final ReentrantLock modelLock = new ReentrantLock(true);
    private final Object lock = new Object();            // guards everything below
    private final ArrayDeque<Step> waiting = new ArrayDeque<>();
    private final boolean[] slotTaken;
    private int decoding;                                 // open sequences past their prefill
    private int largestBatch;
    private long batches;

    public DecodeBatcher(DecoderModel model, int maxBatch) {
        if (maxBatch < 1 || maxBatch > Math.min(DecoderModel.MAX_SLOTS, model.chunkTokens())) {
            throw new IllegalArgumentException("max batch " + maxBatch + " (1.." + Math.min(DecoderModel.MAX_SLOTS, model.chunkTokens())
                    + ": sequence slots, and rows of one pass)");
        }
        this.model = model;
        this.maxBatch = maxBatch;
        this.slotTaken = new boolean[maxBatch];
    }

    public DecoderModel model() {
        return model;
    }

    public int maxBatch() {
        return maxBatch;
    }

    /** The most sequences one decode pass has run so far. */
    public int largestBatch() {
        synchronized (lock) {
            return largestBatch;
        }
    }

    /** Decode passes run so far. */
    public long batches() {
        synchronized (lock) {
            return batches;
        }
    }

    /** Takes a free slot; close the sequence to give it back. */
    public Sequence open() {
        synchronized (lock) {
            for (int s = 0; s < maxBatch; s++) {
                if (!slotTaken[s]) {
                    slotTaken[s] = true;
                    return new Sequence(s);
                }
            }
        }
        throw new IllegalStateException("all " + maxBatch + " sequence slots are in use");
    }

    /** One generation's sequence: its prompt at position 0 of its slot, then one token per step. */
    public final class Sequence implements AutoCloseable {
        private final int slot;
        private boolean decodingNow;
        private boolean closed;

        private Sequence(int slot) {
            this.slot = slot;
        }

        /** Runs the prompt from position 0 (the slot's earlier contents are overwritten); logits of its last token. */
        public float[] prefill(int[] prompt) {
            float[] logits;
            modelLock.lock();
            try {
                logits = model.forward(slot, prompt, 0, false);
            } finally {
                modelLock.unlock();
            }
            decodingFromNow();
            return logits;
        }

        /**
         * {@link #prefill}'s greedy next token (the argmax, found where the logits are: {@link DecoderModel#forwardGreedy}),
         * or {@link RowMax#NOT_FINITE}.
         */
        public int prefillGreedy(int[] prompt) {
            int next;
            modelLock.lock();
            try {
                next = model.forwardGreedy(slot, prompt, 0);
            } finally {
                modelLock.unlock();
            }
            decodingFromNow();
            return next;
        }

        private void decodingFromNow() {
            synchronized (lock) {
                if (!decodingNow) {
                    decodingNow = true;
                    decoding++;
                }
            }
        }

        /**
         * {@link #prefill}'s next token drawn by {@code sampler} (its {@link Sampler#candidates} &gt; 0) from the
         * candidates found where the logits are ({@link DecoderModel#forwardTop}), or {@link RowMax#NOT_FINITE}.
         */
        public int prefillSampled(int[] prompt, Sampler sampler) {
            int next;
            modelLock.lock();
            try {
                next = sampler.sample(model.forwardTop(slot, prompt, 0, sampler.candidates(), sampler.inverseTemperature()), () -> model.lastLogits(0));
            } finally {
                modelLock.unlock();
            }
            decodingFromNow();
            return next;
        }

        /** {@link #decode}'s next token drawn by {@code sampler} (see {@link #prefillSampled}). */
        public int decodeSampled(int token, int pos, Sampler sampler) {
            return step(new Step(slot, token, pos, false, sampler)).next;
        }

        /** Runs token at pos (after the prefill and every earlier step), batched with the other sequences' steps. */
        public float[] decode(int token, int pos) {
            return step(new Step(slot, token, pos, false, null)).logits;
        }

        /** {@link #decode}'s greedy next token, or {@link RowMax#NOT_FINITE} (see {@link #prefillGreedy}). */
        public int decodeGreedy(int token, int pos) {
            return step(new Step(slot, token, pos, true, null)).next;
        }

        @Override
        public void close() {
            synchronized (lock) {
                if (closed) return;
                closed = true;
                if (decodingNow) decoding--;
                slotTaken[slot] = false;
                lock.notifyAll();   // a leader waiting for this sequence's step stops waiting
            }
        }
    }

    /** A host argmax (-1: a value not finite) as a step's pick. */
    private static int picked(int at) {
        return at < 0 ? RowMax.NOT_FINITE : at;
    }

    private static final class Step {
        final int slot, token, pos;
        final boolean greedy;   // wants only the argmax (next), not the logits
        final Sampler sampler;  // non-null: wants the token it draws (next), from candidates where the logits are
        float[] logits;
        int next;
        RuntimeException error;
        boolean done;

        Step(int slot, int token, int pos, boolean greedy, Sampler sampler) {
            this.slot = slot;
            this.token = token;
            this.pos = pos;
            this.greedy = greedy;
            this.sampler = sampler;
        }

        boolean picks() {
            return greedy || sampler != null;
        }
    }

    private Step step(Step s) {
        synchronized (lock) {
            waiting.add(s);
            lock.notifyAll();
        }
        while (true) {
            synchronized (lock) {
                if (s.done) break;
            }
            if (modelLock.tryLock()) {
                try {
                    lead();
                } finally {
                    modelLock.unlock();
                }
                synchronized (lock) {
                    lock.notifyAll();
                }
                continue;
            }
            synchronized (lock) {
                if (!s.done) {
                    try {
                        lock.wait(1);   // the leader notifies; the timeout covers a model lock freed by a prefill
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                        throw new IllegalStateException("interrupted while waiting for a decode step", e);
                    }
                }
            }
        }
        if (s.error != null) throw s.error;
        return s;
    }

    /** With the model lock: gathers the queued steps (waiting briefly for the decoding sequences' steps) and runs them. */
    private void lead() {
        List<Step> batch = new ArrayList<>();
        synchronized (lock) {
            long deadline = System.nanoTime() + JOIN_NANOS;
            while (waiting.size() < decoding && waiting.size() < maxBatch) {
                long left = deadline - System.nanoTime();
                if (left <= 0) break;
                try {
                    lock.wait(Math.max(1, left / 1_000_000), (int) (left % 1_000_000));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    break;
                }
            }
            while (!waiting.isEmpty() && batch.size() < maxBatch) batch.add(waiting.poll());
        }
        if (batch.isEmpty()) return;
        int n = batch.size();
        float[][] rows = new float[n][];
        int[] next = new int[n];
        boolean allGreedy = batch.stream().allMatch(s -> s.greedy);
        boolean allPick = batch.stream().allMatch(Step::picks);
        RuntimeException error = null;
        try {
            if (n == 1) {
                Step s = batch.getFirst();
                if (s.greedy) next[0] = model.forwardGreedy(s.slot, new int[] {s.token}, s.pos);
                else if (s.sampler != null) {
                    RowTop t = model.forwardTop(s.slot, new int[] {s.token}, s.pos, s.sampler.candidates(), s.sampler.inverseTemperature());
                    next[0] = s.sampler.sample(t, () -> model.lastLogits(0));
                } else rows[0] = model.forward(s.slot, new int[] {s.token}, s.pos, false);
            } else {
                int vocab = model.vocabSize();
                int[] slots = new int[n], tokens = new int[n], pos = new int[n];
                for (int i = 0; i < n; i++) {
                    slots[i] = batch.get(i).slot;
                    tokens[i] = batch.get(i).token;
                    pos[i] = batch.get(i).pos;
                }
                if (allGreedy) {
                    next = model.decodeGreedy(slots, tokens, pos);
                } else if (allPick) {
                    // greedy and sampled rows: candidates where the logits are (a greedy row's pick is its first)
                    int m = 1;
                    double[] invT = new double[n];
                    for (int i = 0; i < n; i++) {
                        Sampler sp = batch.get(i).sampler;
                        m = Math.max(m, sp == null ? 1 : sp.candidates());
                        invT[i] = sp == null ? 1 : sp.inverseTemperature();
                    }
                    RowTop[] t = model.decodeTop(slots, tokens, pos, m, invT);
                    for (int i = 0; i < n; i++) {
                        int row = i;
                        Sampler sp = batch.get(i).sampler;
                        int greedy = sp == null && t[i].ranked() ? t[i].greedyId() : -1;   // -1: the candidates cannot tell
                        if (sp != null) next[i] = sp.sample(t[i], () -> model.lastLogits(row));
                        else if (t[i].status() == RowTop.Status.NOT_FINITE) next[i] = RowMax.NOT_FINITE;
                        else if (greedy >= 0) next[i] = greedy;
                        else next[i] = picked(Logits.argmaxFinite(model.lastLogits(row)));
                    }
                } else {
                    // some rows need their logits: every row's come back; the greedy and sampled rows pick theirs here
                    float[] all = model.decode(slots, tokens, pos);
                    for (int i = 0; i < n; i++) {
                        int row = i;
                        Step s = batch.get(i);
                        if (s.greedy) next[i] = picked(Logits.argmaxRow(all, i, vocab));
                        else if (s.sampler != null) next[i] = s.sampler.sample(RowTop.UNRANKED_ROW, () -> java.util.Arrays.copyOfRange(all, row * vocab, (row + 1) * vocab));
                        else rows[i] = java.util.Arrays.copyOfRange(all, i * vocab, (i + 1) * vocab);
                    }
                }
            }
        } catch (RuntimeException e) {
            error = e;
        } catch (Error e) {   // every step of the batch must finish, or its threads would wait for ever
            error = new IllegalStateException("decode step failed: " + e, e);
        }
        synchronized (lock) {
            batches++;
            largestBatch = Math.max(largestBatch, batch.size());
            for (int i = 0; i < batch.size(); i++) {
                Step s = batch.get(i);
                s.logits = rows[i];
                s.next = next[i];
                s.error = error;
                s.done = true;
            }
            lock.notifyAll();
        }
    }
}
