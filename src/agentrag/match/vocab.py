"""Word lists of the matching core: function words, no-answer phrases, abbreviations.

Every list is data the core reads; no gate keeps a list of its own.
"""

from __future__ import annotations

#: words that carry no content of their own (articles, prepositions, pronouns, auxiliaries,
#: conjunctions); a match made only of them grounds nothing
FUNCTION_WORDS = frozenset("""
a an the of in on at to for from by with without into onto over under about after before during
since until than as and or but nor so yet if then that which who whom whose what when where why how
is are was were be been being am has have had do does did will would shall should can could may
might must it its he she they them his her their this these those there here not no also only
very more most such some any each other all both de la le von van der du di da del i me my we us our
you your
""".split())

#: articles, dropped from both sides before any comparison ("The Hague" and "Hague" are one name)
ARTICLES = frozenset({"a", "an", "the"})

#: written forms of "there is no answer"; compared after lower-casing, transliteration and
#: dropping punctuation, so "N/A", "n.a." and "N.A" are all ``n a``/``na``
NO_ANSWER_PHRASES = frozenset("""
unknown|unknowable|none|nil|null|na|n a|nan|undefined|undetermined|indeterminate|unclear|uncertain
|not applicable|not available|not known|not stated|not mentioned|not specified|not given|not provided
|not found|not clear|not determined|not determinable|not answerable|not possible to determine|not possible to say
|not enough information|not enough info|not enough data|not enough context|insufficient information
|insufficient data|insufficient evidence|insufficient context|no information|no info|no data|no answer
|no answer found|no result|no results|no idea|no clue|no evidence|no relevant information|no such information
|no mention|no record|no records|none found|none of the above|none given|none mentioned|none stated
|unanswerable|cannot answer|can not answer|cant answer|cannot be answered|can not be answered|cannot be determined
|can not be determined|cant be determined|cannot determine|can not determine|cant determine|cannot say|cant say
|cannot tell|cant tell|cannot know|impossible to determine|impossible to say|impossible to tell|unable to determine
|unable to answer|unable to find|unable to say|i dont know|i do not know|dont know|do not know|idk|not sure
|i am not sure|im not sure|unsure|no one knows|nobody knows|information not available|data not available
|answer unknown|unknown answer|not reported|tbd|to be determined
""".replace("\n", "").split("|"))

#: lead-ins and tails that may wrap a no-answer phrase ("The answer is unknown", "not stated in the text")
NO_ANSWER_LEADS = ("the answer is ", "answer is ", "answer ", "final answer ", "the answer ", "it is ", "this is ",
                   "that is ", "its ", "it s ", "sorry ", "sorry but ", "unfortunately ", "the information is ",
                   "the date is ", "the name is ", "the value is ", "the result is ")
NO_ANSWER_TAILS = ("in the documents", "in the document", "in the text", "in the context", "in the passages",
                   "in the passage", "in the given text", "in the provided text", "in the provided documents",
                   "in the given documents", "in the sources", "from the documents", "from the text",
                   "from the context", "from the passages", "from the given information", "from the information",
                   "based on the documents", "based on the text", "based on the context", "based on the information",
                   "based on the given information", "based on the provided information", "according to the documents",
                   "according to the text", "in the evidence", "from the evidence", "in the available information",
                   "with the given information", "with the information given", "given the information",
                   "at this time", "at the moment", "yet", "for sure", "for certain", "here", "available",
                   "found", "given", "provided", "known", "at all", "whatsoever", "sorry")

#: multi-word names and their short forms, each group one canonical token; a short form written in
#: capitals only ("US", "UK") so that the pronoun "us" is never a country
ABBREVIATION_GROUPS: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    # (canonical token, long forms (lower-case words), capitalised short forms)
    ("unitedstates", ("united states of america", "united states"), ("US", "USA")),
    ("unitedkingdom", ("united kingdom of great britain and northern ireland", "united kingdom"), ("UK",)),
    ("sovietunion", ("union of soviet socialist republics", "soviet union"), ("USSR",)),
    ("unitednations", ("united nations",), ("UN",)),
    ("europeanunion", ("european union",), ("EU",)),
    ("unitedarabemirates", ("united arab emirates",), ("UAE",)),
    ("newyorkcity", ("new york city",), ("NYC",)),
    ("peoplesrepublicofchina", ("people s republic of china", "peoples republic of china"), ("PRC",)),
    ("democraticrepublicofcongo", ("democratic republic of the congo", "democratic republic of congo"), ("DRC",)),
    ("districtofcolumbia", ("district of columbia",), ("DC",)),
    ("footballclub", ("football club",), ("FC",)),
    ("worldwar1", ("world war 1", "1st world war", "great war"), ("WWI", "WW1")),
    ("worldwar2", ("world war 2", "2nd world war"), ("WWII", "WW2")),
)

#: single words and their abbreviations (one canonical form each): "Saint"/"St." are one word
WORD_ABBREVIATIONS = {
    "saint": "st", "mount": "mt", "fort": "ft", "company": "co", "corporation": "corp", "incorporated": "inc",
    "limited": "ltd", "brothers": "bros", "doctor": "dr", "junior": "jr", "senior": "sr", "number": "num",
    "university": "univ", "department": "dept", "avenue": "ave", "street": "st", "road": "rd",
    "mister": "mr", "professor": "prof", "general": "gen", "colonel": "col", "captain": "capt",
    "lieutenant": "lt", "sergeant": "sgt", "governor": "gov", "president": "pres", "volume": "vol",
    "versus": "vs", "association": "assn", "international": "intl", "national": "natl",
}
#: the abbreviations that stand for a word only when they are not a word of their own; "no" is a
#: word ("no" answers), so only "No." with its period is "number"
DOTTED_ONLY = frozenset({"no", "co", "col", "gen", "vol"})

#: words that do not identify a name on their own (a partial mention must be more than one of them)
GENERIC_NAME_WORDS = frozenset("""
university college school institute academy church cathedral river lake mount mt mountain island islands
county city town village district province state states kingdom republic empire national international
new old north south east west northern southern eastern western upper lower great little grand saint st
royal united federal central general first second third company co corp inc ltd club fc team league
association society party war battle treaty act award prize festival museum park street st road bridge
airport station hotel hospital house hall tower castle palace stadium theatre theater center centre
records film films series album song band group family jr sr ii iii iv mr mrs ms dr sir lord lady king
queen prince princess duke earl count emperor pope san santa los las el de la le du van von der
""".split())

MONTHS = {m: i + 1 for i, m in enumerate(
    "january february march april may june july august september october november december".split())}
MONTHS.update({m[:3]: i for m, i in list(MONTHS.items())})
MONTHS["sept"] = 9

YES = frozenset({"yes", "yeah", "yep", "true", "correct", "indeed", "affirmative"})
NO = frozenset({"no", "nope", "false", "incorrect", "negative"})

__all__ = ["FUNCTION_WORDS", "ARTICLES", "NO_ANSWER_PHRASES", "NO_ANSWER_LEADS", "NO_ANSWER_TAILS",
           "ABBREVIATION_GROUPS", "WORD_ABBREVIATIONS", "DOTTED_ONLY", "GENERIC_NAME_WORDS", "MONTHS", "YES", "NO"]

#: country -> the adjectives (demonyms) a text states a nationality with ("She was French" states
#: France as a country of citizenship); used as aliases where a relation asks for a country
DEMONYMS: dict[str, tuple[str, ...]] = {
    "America": ("American",), "Afghanistan": ("Afghan",), "Albania": ("Albanian",), "Algeria": ("Algerian",), "Argentina": ("Argentine", "Argentinian"),
    "Armenia": ("Armenian",), "Australia": ("Australian",), "Austria": ("Austrian",), "Azerbaijan": ("Azerbaijani",),
    "Bangladesh": ("Bangladeshi",), "Belarus": ("Belarusian",), "Belgium": ("Belgian",), "Bolivia": ("Bolivian",),
    "Bosnia and Herzegovina": ("Bosnian",), "Brazil": ("Brazilian",), "Bulgaria": ("Bulgarian",), "Cameroon": ("Cameroonian",),
    "Canada": ("Canadian",), "Chile": ("Chilean",), "China": ("Chinese",), "Colombia": ("Colombian",),
    "Croatia": ("Croatian",), "Cuba": ("Cuban",), "Czech Republic": ("Czech",), "Czechoslovakia": ("Czechoslovak",),
    "Denmark": ("Danish",), "Ecuador": ("Ecuadorian",), "Egypt": ("Egyptian",), "England": ("English",),
    "Estonia": ("Estonian",), "Ethiopia": ("Ethiopian",), "Finland": ("Finnish",), "France": ("French",),
    "Georgia": ("Georgian",), "Germany": ("German",), "Ghana": ("Ghanaian",), "Greece": ("Greek",),
    "Hungary": ("Hungarian",), "Iceland": ("Icelandic",), "India": ("Indian",), "Indonesia": ("Indonesian",),
    "Iran": ("Iranian", "Persian"), "Iraq": ("Iraqi",), "Ireland": ("Irish",), "Israel": ("Israeli",),
    "Italy": ("Italian",), "Jamaica": ("Jamaican",), "Japan": ("Japanese",), "Kenya": ("Kenyan",),
    "Latvia": ("Latvian",), "Lebanon": ("Lebanese",), "Lithuania": ("Lithuanian",), "Malaysia": ("Malaysian",),
    "Mexico": ("Mexican",), "Morocco": ("Moroccan",), "Nepal": ("Nepalese", "Nepali"), "Netherlands": ("Dutch",),
    "New Zealand": ("New Zealander",), "Nigeria": ("Nigerian",), "North Korea": ("North Korean",), "Norway": ("Norwegian",),
    "Pakistan": ("Pakistani",), "Peru": ("Peruvian",), "Philippines": ("Filipino", "Philippine"), "Poland": ("Polish",),
    "Portugal": ("Portuguese",), "Romania": ("Romanian",), "Russia": ("Russian",), "Saudi Arabia": ("Saudi",),
    "Scotland": ("Scottish", "Scots"), "Serbia": ("Serbian",), "Slovakia": ("Slovak",), "Slovenia": ("Slovenian",),
    "South Africa": ("South African",), "South Korea": ("South Korean", "Korean"), "Soviet Union": ("Soviet",),
    "Spain": ("Spanish",), "Sri Lanka": ("Sri Lankan",), "Sweden": ("Swedish",), "Switzerland": ("Swiss",),
    "Syria": ("Syrian",), "Taiwan": ("Taiwanese",), "Thailand": ("Thai",), "Turkey": ("Turkish",),
    "Ukraine": ("Ukrainian",), "United Kingdom": ("British",), "United States": ("American",),
    "United States of America": ("American",), "Uruguay": ("Uruguayan",), "Venezuela": ("Venezuelan",),
    "Vietnam": ("Vietnamese",), "Wales": ("Welsh",), "Yugoslavia": ("Yugoslav",),
}
