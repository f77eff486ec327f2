package dev.v100.runtime.cuda;

import org.junit.platform.engine.TestExecutionResult;
import org.junit.platform.engine.discovery.DiscoverySelectors;
import org.junit.platform.launcher.Launcher;
import org.junit.platform.launcher.LauncherDiscoveryRequest;
import org.junit.platform.launcher.TagFilter;
import org.junit.platform.launcher.TestExecutionListener;
import org.junit.platform.launcher.TestIdentifier;
import org.junit.platform.launcher.core.LauncherDiscoveryRequestBuilder;
import org.junit.platform.launcher.core.LauncherFactory;

import java.io.IOException;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Runs the GPU-tagged tests of the given classes on the JUnit Platform without Maven (the device
 * machine has none) and prints one line per test and a summary; every test runs even when others
 * fail. {@code GpuTestMain REPORT_FILE CLASS...}; exit code 1 when any test failed.
 */
public final class GpuTestMain {
    private GpuTestMain() {}

    record Result(String name, String status, double seconds, String message) {}

    public static void main(String[] args) throws IOException {
        Path report = Path.of(args[0]);
        LauncherDiscoveryRequestBuilder b = LauncherDiscoveryRequestBuilder.request().filters(TagFilter.includeTags("gpu"));
        for (int i = 1; i < args.length; i++) b.selectors(DiscoverySelectors.selectClass(args[i]));
        LauncherDiscoveryRequest request = b.build();
        List<Result> results = java.util.Collections.synchronizedList(new ArrayList<>());
        Map<String, Long> started = new ConcurrentHashMap<>();
        Map<String, String> names = new ConcurrentHashMap<>();
        TestExecutionListener listener = new TestExecutionListener() {
            @Override
            public void executionStarted(TestIdentifier id) {
                started.put(id.getUniqueId(), System.nanoTime());
                names.put(id.getUniqueId(), id.getDisplayName());
            }

            @Override
            public void executionSkipped(TestIdentifier id, String reason) {
                if (id.isTest()) results.add(new Result(name(id, names), "SKIPPED", 0, reason));
            }

            @Override
            public void executionFinished(TestIdentifier id, TestExecutionResult r) {
                if (!id.isTest() && r.getStatus() == TestExecutionResult.Status.SUCCESSFUL) return;
                double s = (System.nanoTime() - started.getOrDefault(id.getUniqueId(), System.nanoTime())) / 1e9;
                String status = switch (r.getStatus()) {
                    case SUCCESSFUL -> "PASS";
                    case ABORTED -> "ABORTED";
                    case FAILED -> "FAIL";
                };
                String msg = r.getThrowable().map(GpuTestMain::describe).orElse("");
                results.add(new Result(name(id, names) + (id.isTest() ? "" : " (container)"), status, s, msg));
                System.out.printf(Locale.ROOT, "%-7s %6.2f s  %s%s%n", status, s, name(id, names), msg.isEmpty() ? "" : "  -- " + firstLine(msg));
                System.out.flush();
            }
        };
        Launcher launcher = LauncherFactory.create();
        launcher.execute(request, listener);
        long pass = results.stream().filter(r -> r.status.equals("PASS")).count();
        long fail = results.stream().filter(r -> r.status.equals("FAIL")).count();
        long other = results.size() - pass - fail;
        StringBuilder sb = new StringBuilder();
        for (Result r : results) {
            sb.append(String.format(Locale.ROOT, "%-7s %7.2f s  %s%n", r.status, r.seconds, r.name));
            if (!r.message.isEmpty() && !r.status.equals("PASS")) sb.append("        ").append(r.message.replace("\n", "\n        ")).append('\n');
        }
        sb.append(String.format(Locale.ROOT, "%d passed, %d failed, %d skipped/aborted%n", pass, fail, other));
        Files.createDirectories(report.toAbsolutePath().getParent());
        Files.writeString(report, sb.toString());
        System.out.printf(Locale.ROOT, "GPU TESTS: %d passed, %d failed, %d skipped/aborted (details: %s)%n", pass, fail, other, report);
        System.exit(fail > 0 || pass == 0 ? 1 : 0);
    }

    /** Class > dynamic container (a golden case) > test display name. */
    static String name(TestIdentifier id, Map<String, String> names) {
        String uid = id.getUniqueId();
        int c = uid.indexOf("[class:");
        String cls = c < 0 ? "" : uid.substring(c + 7, uid.indexOf(']', c));
        cls = cls.substring(cls.lastIndexOf('.') + 1);
        String parent = id.getParentId().filter(p -> p.endsWith("]") && (p.contains("dynamic-container") || p.contains("test-factory")))
                .map(names::get).orElse(null);
        return cls + " > " + (parent == null ? "" : parent + " > ") + id.getDisplayName();
    }

    static String describe(Throwable t) {
        StringWriter w = new StringWriter();
        w.append(t.toString());
        StackTraceElement[] st = t.getStackTrace();
        for (int i = 0; i < Math.min(4, st.length); i++) w.append("\n  at ").append(st[i].toString());
        if (t.getCause() != null) w.append("\n  caused by ").append(t.getCause().toString());
        return w.toString();
    }

    static String firstLine(String s) {
        int nl = s.indexOf('\n');
        return nl < 0 ? s : s.substring(0, nl);
    }
}
