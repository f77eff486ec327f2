package dev.v100.runtime.chat;

import java.time.LocalDateTime;
import java.time.format.TextStyle;
import java.util.Locale;

/** Python's {@code datetime.strftime} for the directives chat templates use (C locale). */
final class Strftime {
    private Strftime() {}

    static String format(String fmt, LocalDateTime t) {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < fmt.length(); i++) {
            char c = fmt.charAt(i);
            if (c != '%' || i + 1 >= fmt.length()) {
                sb.append(c);
                continue;
            }
            char d = fmt.charAt(++i);
            switch (d) {
                case 'a' -> sb.append(t.getDayOfWeek().getDisplayName(TextStyle.SHORT, Locale.ENGLISH));
                case 'A' -> sb.append(t.getDayOfWeek().getDisplayName(TextStyle.FULL, Locale.ENGLISH));
                case 'b', 'h' -> sb.append(t.getMonth().getDisplayName(TextStyle.SHORT, Locale.ENGLISH));
                case 'B' -> sb.append(t.getMonth().getDisplayName(TextStyle.FULL, Locale.ENGLISH));
                case 'd' -> sb.append(two(t.getDayOfMonth()));
                case 'e' -> sb.append(String.format("%2d", t.getDayOfMonth()));
                case 'm' -> sb.append(two(t.getMonthValue()));
                case 'y' -> sb.append(two(t.getYear() % 100));
                case 'Y' -> sb.append(t.getYear());
                case 'H' -> sb.append(two(t.getHour()));
                case 'I' -> sb.append(two(t.getHour() % 12 == 0 ? 12 : t.getHour() % 12));
                case 'M' -> sb.append(two(t.getMinute()));
                case 'S' -> sb.append(two(t.getSecond()));
                case 'p' -> sb.append(t.getHour() < 12 ? "AM" : "PM");
                case 'j' -> sb.append(String.format("%03d", t.getDayOfYear()));
                case 'f' -> sb.append(String.format("%06d", t.getNano() / 1000));
                case 'w' -> sb.append(t.getDayOfWeek().getValue() % 7);
                case 'u' -> sb.append(t.getDayOfWeek().getValue());
                case 'F' -> sb.append(t.getYear()).append('-').append(two(t.getMonthValue())).append('-').append(two(t.getDayOfMonth()));
                case 'T' -> sb.append(two(t.getHour())).append(':').append(two(t.getMinute())).append(':').append(two(t.getSecond()));
                case 'D' -> sb.append(two(t.getMonthValue())).append('/').append(two(t.getDayOfMonth())).append('/').append(two(t.getYear() % 100));
                case 'z', 'Z' -> { } // naive datetime: empty, as Python prints for datetime.now()
                case '%' -> sb.append('%');
                default -> sb.append('%').append(d);
            }
        }
        return sb.toString();
    }

    private static String two(int v) {
        return v < 10 ? "0" + v : Integer.toString(v);
    }
}
