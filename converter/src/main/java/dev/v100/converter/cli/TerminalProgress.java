package dev.v100.converter.cli;

import dev.v100.converter.Progress;

import java.io.PrintStream;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A progress bar on a terminal (bytes, rate, ETA, redrawn at most 10 times a second); plain log
 * lines every 10% otherwise (CI logs, pipes).
 */
public final class TerminalProgress implements Progress {
    private final PrintStream out;
    private final boolean terminal;
    private final AtomicLong done = new AtomicLong();
    private volatile long total;
    private volatile long startNanos;
    private volatile long lastDrawNanos;
    private int lastDecile = 0;
    private String what = "";

    public TerminalProgress(PrintStream out, boolean terminal) {
        this.out = out;
        this.terminal = terminal;
    }

    public static TerminalProgress stderr() {
        var c = System.console();
        return new TerminalProgress(System.err, c != null && c.isTerminal());
    }

    @Override
    public void start(String what, long totalBytes) {
        this.what = what;
        this.total = totalBytes;
        this.startNanos = System.nanoTime();
        done.set(0);
        if (!terminal) out.println(what + ": " + human(totalBytes));
    }

    @Override
    public void advance(long bytes) {
        long d = done.addAndGet(bytes);
        long now = System.nanoTime();
        if (terminal) {
            if (now - lastDrawNanos > 100_000_000L) {
                lastDrawNanos = now;
                draw(d, now);
            }
        } else if (total > 0) {
            logDecile(d, now);
        }
    }

    private synchronized void logDecile(long d, long now) {
        int decile = (int) (d * 10 / total);
        if (decile > lastDecile && decile < 10) {
            lastDecile = decile;
            out.println(String.format("  %3d%%  %s / %s  %s/s", decile * 10, human(d), human(total), human(rate(d, now))));
        }
    }

    private synchronized void draw(long d, long now) {
        int width = 30;
        int fill = total == 0 ? width : (int) Math.min(width, d * width / total);
        long rate = rate(d, now);
        String eta = rate > 0 && total > d ? ((total - d) / rate) + "s" : "-";
        out.print(String.format("\r[%s%s] %3d%% %s / %s  %s/s  ETA %s   ", "#".repeat(fill), " ".repeat(width - fill),
                total == 0 ? 100 : d * 100 / total, human(d), human(total), human(rate), eta));
        out.flush();
    }

    private long rate(long d, long now) {
        double s = (now - startNanos) / 1e9;
        return s > 0 ? (long) (d / s) : 0;
    }

    @Override
    public synchronized void note(String line) {
        if (terminal) out.print("\r" + " ".repeat(100) + "\r");
        out.println("  " + line);
    }

    @Override
    public void done() {
        long now = System.nanoTime();
        if (terminal) {
            draw(done.get(), now);
            out.println();
        }
        out.println(String.format("%s: done, %s in %.1f s (%s/s)", what, human(done.get()), (now - startNanos) / 1e9, human(rate(done.get(), now))));
    }

    public static String human(long bytes) {
        if (bytes < 1024) return bytes + " B";
        String[] u = {"KiB", "MiB", "GiB", "TiB"};
        double v = bytes;
        int i = -1;
        while (v >= 1024 && i < u.length - 1) {
            v /= 1024;
            i++;
        }
        return String.format("%.1f %s", v, u[i]);
    }
}
