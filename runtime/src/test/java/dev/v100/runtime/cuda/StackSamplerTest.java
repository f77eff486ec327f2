package dev.v100.runtime.cuda;

import org.junit.jupiter.api.Test;

import java.io.PrintWriter;
import java.io.StringWriter;

import static org.junit.jupiter.api.Assertions.assertTrue;

/** The bench's host stack sampler (no GPU needed): a thread busy in one method shows up as that method. */
class StackSamplerTest {
    private static volatile long sink;

    private static void spinInAKnownPlace(long nanos) {
        long end = System.nanoTime() + nanos;
        long x = 1;
        while (System.nanoTime() < end) x = x * 6364136223846793005L + 1442695040888963407L;
        sink = x;
    }

    @Test
    void aBusyThreadIsSampledWhereItSpins() throws Exception {
        Thread busy = Thread.ofPlatform().start(() -> spinInAKnownPlace(300_000_000L));
        StringWriter text = new StringWriter();
        try (StackSampler s = new StackSampler(busy, 200)) {
            Thread.sleep(200);
            s.close();
            s.print(new PrintWriter(text, true), 5);
        }
        busy.join();
        String out = text.toString();
        assertTrue(out.startsWith("host stack samples"), out);
        assertTrue(out.contains("StackSamplerTest.spinInAKnownPlace"), out);
    }
}
