"""Deterministic generator of the tiny-chat training corpus: template stories and ChatML chats.

Everything here is a pure function of the random.Random passed in, so a seed fixes the corpus. The world is
small on purpose (a few hundred words, one fixed set of facts: the sky is blue, a cow says moo) so that a
~1 M parameter model can learn it in minutes of one CPU core.
"""
import random

GIRLS = ["Lily", "Mia", "Anna", "Zoe", "Emma", "Sue", "Lucy", "Sara", "Ella", "Amy", "Kate", "Rose", "Nina", "Ruby"]
BOYS = ["Tom", "Max", "Ben", "Sam", "Leo", "Tim", "Jack", "Dan", "Finn", "Jake", "Noah", "Alex", "Ned", "Bob"]

# kind -> facts; "person" kinds have no animal facts
ANIMALS = {
    "cat": dict(sound="meow", food="fish", home="a warm house", legs="four", can=["run", "jump", "climb"], young="kitten"),
    "dog": dict(sound="woof", food="bones", home="a little house in the yard", legs="four", can=["run", "jump", "swim"], young="puppy"),
    "bird": dict(sound="tweet", food="seeds", home="a nest in a tree", legs="two", can=["fly", "jump", "sing"], young="chick"),
    "fish": dict(sound="blub", food="small bugs", home="the water", legs="no", can=["swim"], young="baby fish"),
    "rabbit": dict(sound="squeak", food="carrots", home="a hole in the ground", legs="four", can=["run", "jump"], young="bunny"),
    "bear": dict(sound="growl", food="honey", home="a cave in the forest", legs="four", can=["run", "swim", "climb"], young="cub"),
    "fox": dict(sound="yip", food="berries", home="a den in the forest", legs="four", can=["run", "jump"], young="kit"),
    "mouse": dict(sound="squeak", food="cheese", home="a small hole in the wall", legs="four", can=["run", "climb"], young="baby mouse"),
    "frog": dict(sound="ribbit", food="flies", home="a pond", legs="four", can=["jump", "swim"], young="tadpole"),
    "duck": dict(sound="quack", food="bread", home="a pond", legs="two", can=["swim", "fly", "walk"], young="duckling"),
    "cow": dict(sound="moo", food="grass", home="a farm", legs="four", can=["walk", "run"], young="calf"),
    "pig": dict(sound="oink", food="apples", home="a farm", legs="four", can=["run", "walk"], young="piglet"),
    "sheep": dict(sound="baa", food="grass", home="a farm", legs="four", can=["run", "jump"], young="lamb"),
    "horse": dict(sound="neigh", food="hay", home="a barn", legs="four", can=["run", "jump"], young="foal"),
    "lion": dict(sound="roar", food="meat", home="the grass lands", legs="four", can=["run", "climb"], young="cub"),
    "owl": dict(sound="hoot", food="mice", home="a hole in a tree", legs="two", can=["fly"], young="owlet"),
    "monkey": dict(sound="ooh ooh", food="bananas", home="the trees of the jungle", legs="two", can=["climb", "jump", "run"], young="baby monkey"),
    "bee": dict(sound="buzz", food="nectar from flowers", home="a hive", legs="six", can=["fly"], young="larva"),
    "turtle": dict(sound="hiss", food="leaves", home="a pond", legs="four", can=["swim", "walk"], young="hatchling"),
    "spider": dict(sound=None, food="flies", home="a web", legs="eight", can=["climb", "walk"], young="spiderling"),
}
ALL_ABILITIES = ["fly", "swim", "run", "jump", "climb"]
PERSONS = ["girl", "boy"]
ADJS = ["little", "big", "happy", "small", "brave", "kind", "shy", "funny", "curious", "friendly", "young", "sleepy", "clever", "gentle"]
COLORS = ["red", "blue", "green", "yellow", "pink", "purple", "orange", "white", "black", "brown"]
OBJECTS = ["ball", "kite", "box", "hat", "book", "toy car", "doll", "boat", "shell", "stone", "cup", "drum", "bell", "ribbon", "blanket"]
FOODS = ["apple", "cake", "cookie", "sandwich", "pie", "banana", "carrot", "pear", "bun"]
PLACES = ["park", "forest", "garden", "beach", "river", "farm", "lake", "hill", "meadow", "town", "market", "playground", "zoo", "field"]
LANDMARKS = ["big tree", "old bridge", "red barn", "little pond", "tall rock", "green bush", "wooden fence", "yellow flowers"]
ACTIVITIES = ["play", "run", "dance", "sing", "read a book", "fly a kite", "look at the clouds", "pick flowers", "build a sand castle",
              "play with a ball", "look for shells", "have a picnic", "watch the birds"]
SKILLS = [("swim", "swim across the pond"), ("climb", "climb the big tree"), ("ride", "ride a bike"), ("jump", "jump over the log"),
          ("whistle", "whistle a song"), ("read", "read a whole book"), ("bake", "bake a cake")]
WEATHER = ["sunny", "warm", "windy", "cold", "bright", "cloudy"]
FEELINGS = ["happy", "glad", "proud", "excited", "thankful"]

FACT_COLORS = {"the sky": "blue", "the grass": "green", "the sun": "yellow", "snow": "white", "an apple": "red", "a banana": "yellow",
               "the sea": "blue", "the night sky": "black", "an orange": "orange", "a leaf": "green", "a cloud": "white",
               "a carrot": "orange", "milk": "white", "a strawberry": "red", "a lemon": "yellow", "a frog": "green",
               "coal": "black", "chocolate": "brown", "a pig": "pink", "a plum": "purple"}
OPPOSITES = {"hot": "cold", "big": "small", "up": "down", "day": "night", "happy": "sad", "fast": "slow", "old": "new", "open": "closed",
             "wet": "dry", "tall": "short", "light": "dark", "full": "empty", "loud": "quiet", "in": "out", "yes": "no", "good": "bad",
             "hard": "soft", "left": "right", "cold": "hot", "small": "big", "sad": "happy", "slow": "fast", "dark": "light"}
NUMBERS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
SYSTEM_PROMPTS = ["You are a helpful assistant.", "You are Tiny, a small and friendly chat model.", "You are a kind helper who answers simply."]


def article(word):
    return "an" if word[0] in "aeiou" else "a"


def plural(kind):
    return {"fish": "fish", "sheep": "sheep", "mouse": "mice", "fox": "foxes"}.get(kind, kind + "s")


def cap(s):
    return s[0].upper() + s[1:]


class Hero:
    """A story character: name, kind ("cat", "girl", ...), pronouns."""

    def __init__(self, rng, kind=None, name=None, avoid=()):
        self.kind = kind or rng.choice(list(ANIMALS) + PERSONS * 4)
        if name is None:
            pool = BOYS if self.kind == "boy" else GIRLS if self.kind == "girl" else rng.choice([GIRLS, BOYS])
            name = rng.choice([n for n in pool if n not in avoid])
        self.name = name
        girl = self.kind == "girl" or (self.kind not in PERSONS and name in GIRLS)
        self.he, self.him, self.his = ("she", "her", "her") if girl else ("he", "him", "his")
        self.adj = rng.choice(ADJS)

    def intro(self):
        return f"{article(self.adj)} {self.adj} {self.kind} named {self.name}"


def story(rng, hero=None):
    """One short story, 5 to 12 sentences, as plain text."""
    h = hero or Hero(rng)
    f = Hero(rng, avoid=(h.name,))
    place, color, obj = rng.choice(PLACES), rng.choice(COLORS), rng.choice(OBJECTS)
    opener = rng.choice(["Once upon a time, there was", "Once upon a time, there was", "One day, there was", "There once was"])
    s = [f"{opener} {h.intro()}."]
    if h.kind in ANIMALS and rng.random() < 0.5:
        s.append(f"{h.name} lived in {ANIMALS[h.kind]['home']}.")
    else:
        s.append(f"{h.name} liked to {rng.choice(ACTIVITIES)}.")
    plot = rng.randrange(6)
    if plot == 0:  # finds something
        s += [f"One day, {h.name} went to the {place}.",
              f"{cap(h.he)} saw {article(color)} {color} {obj} near the {rng.choice(LANDMARKS)}.",
              f"{h.name} picked up the {obj} and smiled.",
              f"{cap(h.he)} played with the {obj} all day.",
              f"When the sun went down, {h.name} went home.",
              f"{cap(h.he)} was very {rng.choice(FEELINGS)}."]
    elif plot == 1:  # loses something, a friend helps
        s += [f"{h.name} had {article(color)} {color} {obj}.",
              f"{cap(h.he)} loved the {obj} very much.",
              f"One day, {h.name} lost the {obj} at the {place}.",
              f"{h.name} was sad and began to cry.",
              f"Then {h.his} friend {f.name}, {article(f.adj)} {f.adj} {f.kind}, came by.",
              f"\"Why are you sad?\" asked {f.name}.",
              f"\"I lost my {obj},\" said {h.name}.",
              f"\"I will help you,\" said {f.name}.",
              f"They looked everywhere.",
              f"At last, {f.name} found the {obj} under the {rng.choice(LANDMARKS)}.",
              f"\"Thank you, {f.name}!\" said {h.name}.",
              "From that day on, they were best friends."]
    elif plot == 2:  # learns a skill
        verb, goal = rng.choice(SKILLS)
        s += [f"{h.name} wanted to {goal}, but {h.he} could not.",
              f"{cap(h.he)} tried and tried, but it was too hard.",
              f"{h.name} felt sad.",
              f"{h.his.capitalize()} friend {f.name} said, \"Do not give up! Try again tomorrow.\"",
              f"The next day, {h.name} tried again.",
              f"This time, {h.he} did it!",
              f"{h.name} felt very proud, and {f.name} was {rng.choice(FEELINGS)} too."]
    elif plot == 3:  # rain and a rainbow
        act = rng.choice(ACTIVITIES)
        s += [f"It was a {rng.choice(WEATHER)} day.",
              f"{h.name} and {f.name} went to the {place} to {act}.",
              "Suddenly, it began to rain.",
              f"They ran under the {rng.choice(LANDMARKS)} to stay dry.",
              "Soon the rain stopped.",
              "They looked up and saw a big rainbow in the sky.",
              f"\"It is so pretty!\" said {f.name}.",
              f"{h.name} and {f.name} were very {rng.choice(FEELINGS)}."]
    elif plot == 4:  # shares food
        food = rng.choice(FOODS)
        s += [f"One day, {h.name} had {article(food)} {food} for lunch.",
              f"{cap(h.he)} went to the {place} to eat it.",
              f"At the {place}, {h.he} met {f.name}.",
              f"{f.name} was hungry and had no food.",
              f"{h.name} gave half of the {food} to {f.name}.",
              f"\"Thank you!\" said {f.name}.",
              "They ate together and laughed.",
              "Sharing made them both happy."]
    else:  # a gift
        s += [f"Today was {f.name}'s birthday.",
              f"{h.name} wanted to give {f.name} a gift.",
              f"{cap(h.he)} went to the {place} and found {article(color)} {color} {obj}.",
              f"{h.name} put the {obj} in a box.",
              f"{cap(h.he)} gave the box to {f.name}.",
              f"{f.name} opened the box and saw the {obj}.",
              f"\"I love it!\" said {f.name}.",
              f"{h.name} was {rng.choice(FEELINGS)} to make {f.name} smile."]
    if rng.random() < 0.25:
        s.append("The end.")
    return " ".join(s)


def vary(rng, q):
    """Small surface variation of a user question: lower-case start, missing question mark."""
    r = rng.random()
    if r < 0.15:
        q = q[0].lower() + q[1:]
    elif r < 0.25 and q.endswith(("?", ".", "!")):
        q = q[:-1]
    return q


def qa(rng):
    """One (question, answer) pair about the tiny world."""
    t = rng.randrange(12)
    if t == 0:
        thing, color = rng.choice(list(FACT_COLORS.items()))
        q = rng.choice([f"What color is {thing}?", f"What is the color of {thing}?", f"Can you tell me the color of {thing}?"])
        return q, f"{cap(thing)} is {color}."
    if t == 1:
        kind = rng.choice(list(ANIMALS))
        q = rng.choice([f"What does {article(kind)} {kind} say?", f"What sound does {article(kind)} {kind} make?"])
        sound = ANIMALS[kind]["sound"]
        if sound is None:
            return q, f"{cap(article(kind))} {kind} does not make a sound."
        return q, f"{cap(article(kind))} {kind} says {sound}."
    if t == 2:
        kind = rng.choice(list(ANIMALS))
        q = rng.choice([f"Where does {article(kind)} {kind} live?", f"Where do {plural(kind)} live?"])
        return q, f"{cap(article(kind))} {kind} lives in {ANIMALS[kind]['home']}."
    if t == 3:
        kind = rng.choice(list(ANIMALS))
        q = rng.choice([f"What does {article(kind)} {kind} eat?", f"What does {article(kind)} {kind} like to eat?"])
        return q, f"{cap(article(kind))} {kind} likes to eat {ANIMALS[kind]['food']}."
    if t == 4:
        kind = rng.choice(list(ANIMALS))
        legs = ANIMALS[kind]["legs"]
        ans = f"{cap(article(kind))} {kind} has no legs." if legs == "no" else f"{cap(article(kind))} {kind} has {legs} legs."
        return f"How many legs does {article(kind)} {kind} have?", ans
    if t == 5:
        kind, ability = rng.choice(list(ANIMALS)), rng.choice(ALL_ABILITIES)
        can = ANIMALS[kind]["can"]
        if ability in can:
            return f"Can {article(kind)} {kind} {ability}?", f"Yes, {article(kind)} {kind} can {ability}."
        return (f"Can {article(kind)} {kind} {ability}?",
                f"No, {article(kind)} {kind} can not {ability}. {cap(article(kind))} {kind} can {can[0]}.")
    if t == 6:
        word = rng.choice(list(OPPOSITES))
        return f"What is the opposite of {word}?", f"The opposite of {word} is {OPPOSITES[word]}."
    if t == 7:
        n = rng.randrange(2, 11)
        return rng.choice([f"Can you count to {NUMBERS[n]}?", f"Count to {NUMBERS[n]}."]), \
            cap(", ".join(NUMBERS[1:n + 1])) + "."
    if t == 8:
        a = rng.randrange(0, 6)
        b = rng.randrange(0, 6)
        return f"What is {NUMBERS[a]} plus {NUMBERS[b]}?", f"{cap(NUMBERS[a])} plus {NUMBERS[b]} is {NUMBERS[a + b]}."
    if t == 9:
        kind = rng.choice(list(ANIMALS))
        return f"What is a baby {kind} called?", f"A baby {kind} is called {article(ANIMALS[kind]['young'])} {ANIMALS[kind]['young']}."
    if t == 10:
        return rng.choice([
            ("Hello!", "Hello! How can I help you today?"),
            ("Hi", "Hi! What would you like to talk about?"),
            ("Good morning!", "Good morning! I hope you have a nice day."),
            ("How are you?", "I am fine, thank you! How are you?"),
            ("What is your name?", "My name is Tiny. I am a small chat model."),
            ("Who are you?", "I am Tiny, a small chat model. I know about animals, colors and little stories."),
            ("Thank you!", "You are welcome!"),
            ("Goodbye!", "Goodbye! Have a nice day."),
        ])
    # t == 11: a story on request
    hero_kind = rng.choice(list(ANIMALS) + PERSONS)
    hero = Hero(rng, kind=hero_kind)
    q = rng.choice([f"Tell me a story about {article(hero_kind)} {hero_kind}.", f"Can you tell me a story about {article(hero_kind)} {hero_kind}?",
                    f"Tell me a story about {article(hero_kind)} {hero_kind} named {hero.name}.", f"Tell me a story about {hero.name} the {hero_kind}.",
                    f"Please tell me a short story about {article(hero_kind)} {hero_kind}."])
    lead = rng.choice(["", "", "Sure! ", "Here is a story. "])
    return q, lead + story(rng, hero)


def chat(rng):
    """One conversation: optional system prompt, then 1 to 3 user/assistant turns."""
    messages = []
    if rng.random() < 0.25:
        messages.append({"role": "system", "content": rng.choice(SYSTEM_PROMPTS)})
    for _ in range(rng.choice([1, 1, 1, 2, 2, 3])):
        q, a = qa(rng)
        messages += [{"role": "user", "content": vary(rng, q)}, {"role": "assistant", "content": a}]
    return messages


def documents(seed, count, story_fraction=0.4):
    """count documents: plain story strings and chat message lists, in a seed-fixed order."""
    rng = random.Random(seed)
    return [story(rng) if rng.random() < story_fraction else chat(rng) for _ in range(count)]
